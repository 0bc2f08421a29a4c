//! Launcher of kernels/gemv.cu: y = x W^T for a few tokens, and the operands of a linear layer
//! that it shares with the cuBLAS path (crate::gemm).

use super::launch::{grid1, Args, Kernels};
use super::names::{GEMV_MAX_TOKENS, GEMV_NAMES};
use crate::device_ptr::DevicePtr;

/// y[n, rows] (f32, row stride `ldy`) = x[n, k] (bf16) · w[rows, k]^T (bf16); row-major, x and
/// w contiguous, y a block of `rows` columns inside rows of `ldy` (a part of a fused output).
#[derive(Debug, Clone, Copy)]
pub struct LinearArgs {
    pub x: DevicePtr,
    pub w: DevicePtr,
    pub y: DevicePtr,
    /// Tokens (rows of x and y).
    pub n: usize,
    /// Output features (rows of w).
    pub rows: usize,
    /// Input features.
    pub k: usize,
    /// Distance between y's rows, in elements (`rows` when y is just this product).
    pub ldy: usize,
}

/// Warps per row of the GEMV: 8 or 4 where rows are long and few (the down projection: 1,536
/// rows of 8,960 in a 1.5B model, 4,096 of 14,336 in an 8B one), so that enough loads are in
/// flight to stream the weights at full bandwidth; else 1. Each row's sum is computed in a
/// fixed order for a given shape, so the result depends on the shape alone.
pub fn gemv_split(rows: usize, k: usize) -> usize {
    match (rows <= 8192, k) {
        (true, k) if k >= 8192 => 8,
        (true, k) if k >= 4096 => 4,
        _ => 1,
    }
}

impl Kernels {
    /// The product of `a` for `a.n` <= 8 tokens.
    pub fn gemv(&self, a: &LinearArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "gemv takes 1..=8 tokens, not {n}"
        );
        let split = gemv_split(rows, k);
        let rows_per_block = 8 / split;
        // gemv_bf16_<n>_s<split>(w, x, y, rows, k, ldy)
        let args = Args::new()
            .ptr(a.w)
            .ptr(a.x)
            .ptr(a.y)
            .usize(rows)
            .usize(k)
            .usize(a.ldy);
        let variant = match split {
            1 => 0,
            4 => 1,
            _ => 2,
        };
        let name = GEMV_NAMES[variant][n - 1];
        self.launch(name, grid1(rows.div_ceil(rows_per_block), 256), args)
    }
}
