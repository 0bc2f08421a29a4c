//! Launchers of kernels/quant_gemv.cu and kernels/quant_dequant.cu: products, dequantization
//! and embedding lookups on GGUF-quantized matrices kept in their own bits (crate::quant).

use super::gemv::gemv_split;
use super::launch::{grid1, Args, Kernels};
use super::names::{qdequant_name, qembed_name, qgemv_name, GEMV_MAX_TOKENS, QGEMV_SPLITS};
use crate::device_ptr::DevicePtr;
use crate::quant::QuantType;

/// A quantized matrix's planes as kernel arguments (unused ones NULL).
fn with_planes(args: Args, planes: [Option<DevicePtr>; 3]) -> Args {
    planes.into_iter().fold(args, Args::nullable_ptr)
}

/// y[t, r] (f32, row stride `ldy`) = x[t, :] (bf16 [n, k]) · W[r, :] for `n` <= 8 tokens and
/// the `rows` rows of a quantized matrix.
#[derive(Debug, Clone, Copy)]
pub struct QuantGemvArgs {
    pub format: QuantType,
    pub planes: [Option<DevicePtr>; 3],
    pub x: DevicePtr,
    pub y: DevicePtr,
    pub n: usize,
    pub rows: usize,
    pub k: usize,
    pub ldy: usize,
}

impl Kernels {
    pub fn qgemv(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "qgemv takes 1..=8 tokens, not {n}"
        );
        let split_index = usize::from(gemv_split(rows, k) > 1);
        let rows_per_block = 8 / QGEMV_SPLITS[split_index];
        // qgemv_<type>_<n>_s<split>(p0, p1, p2, x, y, rows, k, ldy)
        let args = with_planes(Args::new(), a.planes)
            .ptr(a.x)
            .ptr(a.y)
            .usize(rows)
            .usize(k)
            .usize(a.ldy);
        let name = qgemv_name(a.format, n, split_index);
        self.launch(name, grid1(rows.div_ceil(rows_per_block), 256), args)
    }

    /// Rows `row0 .. row0 + rows` of a quantized [_, k] matrix into bf16 `out` [rows, k].
    pub fn qdequant(
        &self,
        format: QuantType,
        planes: [Option<DevicePtr>; 3],
        out: DevicePtr,
        row0: usize,
        rows: usize,
        k: usize,
    ) -> anyhow::Result<()> {
        let unit_elems = if format.block_len() == 32 { 32 } else { 64 };
        let units = rows * k / unit_elems;
        let blocks = units.div_ceil(256).clamp(1, 65_535);
        // qdequant_<type>(p0, p1, p2, out, row0, rows, k)
        let args = with_planes(Args::new(), planes)
            .ptr(out)
            .usize(row0)
            .usize(rows)
            .usize(k);
        self.launch(qdequant_name(format), grid1(blocks, 256), args)
    }

    /// x[t] = table[tokens[t]] * scale (f32) for `n` tokens of a quantized embedding table.
    #[allow(clippy::too_many_arguments)]
    pub fn qembed(
        &self,
        format: QuantType,
        planes: [Option<DevicePtr>; 3],
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        scale: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        // qembed_<type>(p0, p1, p2, tokens, x, hidden, scale)
        let args = with_planes(Args::new(), planes)
            .ptr(tokens)
            .ptr(x)
            .usize(hidden)
            .f32(scale);
        self.launch(qembed_name(format), grid1(n, 128), args)
    }
}
