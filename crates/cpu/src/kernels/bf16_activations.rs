//! Activations rounded to bf16 for the bf16 path (`bf16_gemm`): each element to the nearest
//! bf16 (ties to even), rows padded with zeros to whole AMX tiles. Apart from the kernels, as
//! `q8_activations` is for the int8 path, so that a task (`qgemm::Task`) can carry them.

use super::amx::{self, TILE_K, TILE_ROWS};

/// x (`[m, k]`) in bf16, rows padded with zeros to a whole number of tiles.
#[derive(Debug, Default)]
pub struct Bf16Activations {
    k: usize,
    data: Vec<u16>,
}

impl Bf16Activations {
    /// Rounds the `m` rows of `x` into `self`, reusing its buffer.
    pub fn convert(&mut self, x: &[f32], m: usize, k: usize) {
        assert!(
            k.is_multiple_of(TILE_K),
            "bf16 activations: k = {k} is not a multiple of {TILE_K}"
        );
        self.k = k;
        let padded = m.next_multiple_of(TILE_ROWS) * k;
        self.data.clear();
        self.data
            .extend(x[..m * k].iter().map(|&v| amx::to_bf16(v)));
        self.data.resize(padded, 0);
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Row `r` and the rows after it.
    pub(crate) fn rows_from(&self, r: usize) -> &[u16] {
        &self.data[r * self.k..]
    }
}
