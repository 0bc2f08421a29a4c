//! Activations rounded to bf16 for the bf16 path: each element to the nearest bf16 (ties to
//! even). For AMX tiles (`bf16_gemm`) the rows are padded with zeros to whole tiles; for the
//! decode kernel (`bf16_decode`) each row also carries the f32 sums of its rounded values per
//! 16 elements. Apart from the kernels, as `q8_activations` is for the int8 path, so that a
//! task (`qgemm::Task`) can carry them.

use super::amx::{self, TILE_K, TILE_ROWS};

/// x (`[m, k]`) in bf16.
#[derive(Debug, Default)]
pub struct Bf16Activations {
    k: usize,
    rows: usize,
    data: Vec<u16>,
    /// Per row, `k / 16` sums of the rounded values (decode layout only).
    sums16: Vec<f32>,
}

impl Bf16Activations {
    /// Rounds the `m` rows of `x` into `self` for AMX tiles: rows padded with zeros to a whole
    /// number of tiles.
    pub fn convert(&mut self, x: &[f32], m: usize, k: usize) {
        assert!(
            k.is_multiple_of(TILE_K),
            "bf16 activations: k = {k} is not a multiple of {TILE_K}"
        );
        self.round(x, m, k, m.next_multiple_of(TILE_ROWS));
        self.sums16.clear();
    }

    /// Rounds the `m` rows of `x` into `self` for the decode kernel: no padding, and each
    /// row's sums per 16 elements.
    pub fn convert_with_sums(&mut self, x: &[f32], m: usize, k: usize) {
        assert!(
            k.is_multiple_of(16),
            "bf16 activations: k = {k} is not a multiple of 16"
        );
        self.round(x, m, k, m);
        self.sums16.clear();
        self.sums16.extend(self.data.chunks_exact(16).map(|run| {
            run.iter()
                .map(|&b| f32::from_bits((b as u32) << 16))
                .sum::<f32>()
        }));
    }

    fn round(&mut self, x: &[f32], m: usize, k: usize, padded_rows: usize) {
        self.k = k;
        self.rows = padded_rows;
        self.data.clear();
        self.data
            .extend(x[..m * k].iter().map(|&v| amx::to_bf16(v)));
        self.data.resize(padded_rows * k, 0);
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Rows held (padding included).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row `r` and the rows after it.
    pub(crate) fn rows_from(&self, r: usize) -> &[u16] {
        &self.data[r * self.k..]
    }

    /// Row `r`'s sums per 16 elements and the rows' after it ([`Self::convert_with_sums`]).
    pub(crate) fn sums16_from(&self, r: usize) -> &[f32] {
        &self.sums16[r * self.k / 16..]
    }
}
