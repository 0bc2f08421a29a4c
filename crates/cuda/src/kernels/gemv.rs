//! Launchers of kernels/gemv.cu and gemv_mma.cu: y = x W^T for a few tokens, and the operands
//! of a linear layer that they share with the cuBLAS path (crate::gemm).

use super::launch::{grid1, Args, Kernels};
use super::names::{GEMV_MAX_TOKENS, GEMV_MMA_NAMES, GEMV_NAMES, QGEMV_SPLITS};
use super::quant::split_index;
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

/// The tensor-core GEMV's split over its 16-row tiles: every warp keeps at least four
/// 128-element blocks of k.
fn gemv_mma_split_index(rows: usize, k: usize) -> usize {
    split_index(rows.div_ceil(16), k / 128, 4)
}

impl Kernels {
    /// The product of `a` for `a.n` <= 8 tokens: one token on the CUDA cores (gemv.cu, which
    /// streams at 84% of the copy bandwidth there), more through the tensor cores when rows are
    /// whole 128-element blocks (gemv_mma.cu: the CUDA-core kernel's time grows with the
    /// tokens, 2.5x for eight).
    pub fn gemv(&self, a: &LinearArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "gemv takes 1..=8 tokens, not {n}"
        );
        if n >= 2 && k.is_multiple_of(128) {
            return self.gemv_mma(a);
        }
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

    /// 2..8 tokens' product through the tensor cores (gemv_mma.cu); k % 128 == 0.
    fn gemv_mma(&self, a: &LinearArgs) -> anyhow::Result<()> {
        let split_index = gemv_mma_split_index(a.rows, a.k);
        let rows_per_block = 16 * 8 / QGEMV_SPLITS[split_index];
        // gemv_mma_bf16_s<split>(w, x, y, rows, k, ldy, n)
        let args = Args::new()
            .ptr(a.w)
            .ptr(a.x)
            .ptr(a.y)
            .usize(a.rows)
            .usize(a.k)
            .usize(a.ldy)
            .usize(a.n);
        let grid = grid1(a.rows.div_ceil(rows_per_block), 256);
        self.launch(GEMV_MMA_NAMES[split_index], grid, args)
    }
}
