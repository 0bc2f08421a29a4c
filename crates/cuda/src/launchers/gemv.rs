//! Launchers of the bf16 products: kernels/gemv.cu (CUDA cores, 1..8 tokens), gemv_mma.cu
//! (tensor cores, 1..64 tokens) and tile_mma.cu (tensor cores, any number of tokens), and the
//! operands of a linear layer that they share with the cuBLAS path (crate::gemm). gemv_mma.cu
//! and tile_mma.cu sum in one order (kernels/bf16_order.cuh): together they are the
//! batch-invariant product.

use super::launch::{grid1, Kernels, Shape};
use super::names::{
    GEMV_MAX_TOKENS, GEMV_MMA_GROUPS, GEMV_MMA_NAMES, GEMV_NAMES, QGEMV_SPLITS, TILE_MMA_ROWS,
    TILE_MMA_SHARED_BYTES, TILE_MMA_TOKENS,
};
use super::signatures::{GemvBf16, GemvMmaBf16, TileMmaBf16};
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

/// Most tokens the skinny tensor-core product takes (8 groups of 8).
pub const SKINNY_MAX_TOKENS: usize = 64;

/// Whether the tensor-core products take this k (whole 32-element pieces of the 128-element
/// blocks of bf16_order.cuh).
pub fn tensor_core_k(k: usize) -> bool {
    k.is_multiple_of(32)
}

/// The parts k's 128-element blocks are split into (bf16_order.cuh), as an index into
/// `QGEMV_SPLITS`: a function of k alone, so that every kernel summing in that order (the
/// skinny and tile products, the quantized one, a dequantized slab of any height) splits
/// alike. The skinny products run one warp per part: as many parts as keep four blocks each,
/// up to 8, so that long rows (a down projection's) keep enough loads in flight.
pub(super) fn bf16_order_split_index(k: usize) -> usize {
    let blocks = k.div_ceil(128);
    QGEMV_SPLITS
        .iter()
        .rposition(|&s| s == 1 || blocks / s >= 4)
        .unwrap_or(0)
}

impl Kernels {
    /// The product of `a` for `a.n` <= 8 tokens, batch-dependent: one token on the CUDA cores
    /// (gemv.cu, which streams near the copy bandwidth there), more through the tensor cores
    /// when rows are whole 128-element blocks (the CUDA-core kernel's time grows with the
    /// tokens). Measured: docs/performance.md, '2026-12-03, later runs: programmatic dependent
    /// launch, chunked sampling, wider GEMV rows' and '2026-12-04 20:53 UTC: bf16 decode of
    /// 2..8 tokens on the tensor cores'.
    pub fn gemv(&self, a: &LinearArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "gemv takes 1..=8 tokens, not {n}"
        );
        if n >= 2 && k.is_multiple_of(128) {
            return self.skinny_mma(a, true);
        }
        let split = gemv_split(rows, k);
        let rows_per_block = 8 / split;
        let variant = match split {
            1 => 0,
            4 => 1,
            _ => 2,
        };
        let params = GemvBf16 {
            kernel: GEMV_NAMES[variant][n - 1],
            w: a.w,
            x: a.x,
            y: a.y,
            rows,
            k,
            ldy: a.ldy,
        };
        self.launch(grid1(rows.div_ceil(rows_per_block), 256), &params)
    }

    /// The batch-invariant product of `a`, any number of tokens: the skinny kernel up to
    /// [`SKINNY_MAX_TOKENS`], the tile kernel beyond; both sum in bf16_order.cuh's order, so
    /// a token's row is the same bit for bit whatever else shares the launch.
    /// `weights_just_written`: the previous kernel wrote `a.w` (a dequantized slab); the
    /// skinny kernel's first weight loads precede its wait for the previous kernel, so it
    /// must not overlap it then.
    pub fn invariant_product(
        &self,
        a: &LinearArgs,
        weights_just_written: bool,
    ) -> anyhow::Result<()> {
        let overlap = !weights_just_written;
        anyhow::ensure!(
            tensor_core_k(a.k),
            "the batch-invariant product needs k % 32 == 0, not {}",
            a.k
        );
        if a.n <= SKINNY_MAX_TOKENS {
            self.skinny_mma(a, overlap)
        } else {
            self.tile_mma(a)
        }
    }

    /// 1..64 tokens through the tensor cores (gemv_mma.cu); k % 32 == 0. `overlap`: whether
    /// it may start during the previous kernel (only if that kernel does not write `a.w`).
    fn skinny_mma(&self, a: &LinearArgs, overlap: bool) -> anyhow::Result<()> {
        let groups = a.n.div_ceil(8);
        let Some(group_index) = GEMV_MMA_GROUPS.iter().position(|&t| t >= groups) else {
            anyhow::bail!("the skinny product takes 1..=64 tokens, not {}", a.n);
        };
        let split_index = bf16_order_split_index(a.k);
        let rows_per_block = 16 * 8 / QGEMV_SPLITS[split_index];
        let params = GemvMmaBf16 {
            kernel: GEMV_MMA_NAMES[group_index][split_index],
            w: a.w,
            x: a.x,
            y: a.y,
            rows: a.rows,
            k: a.k,
            ldy: a.ldy,
            n: a.n,
        };
        let grid = grid1(a.rows.div_ceil(rows_per_block), 256);
        if overlap {
            self.launch(grid, &params)
        } else {
            self.launch_after_previous(grid, &params)
        }
    }

    /// Any number of tokens through tile_mma.cu's 128 x 128 tiles; k % 32 == 0.
    fn tile_mma(&self, a: &LinearArgs) -> anyhow::Result<()> {
        let params = TileMmaBf16 {
            w: a.w,
            x: a.x,
            y: a.y,
            rows: a.rows,
            k: a.k,
            ldy: a.ldy,
            n: a.n,
            split: QGEMV_SPLITS[bf16_order_split_index(a.k)],
        };
        let shape = Shape {
            grid: (
                a.rows.div_ceil(TILE_MMA_ROWS) as u32,
                a.n.div_ceil(TILE_MMA_TOKENS) as u32,
                1,
            ),
            block: 256,
        };
        self.launch_with_shared(shape, TILE_MMA_SHARED_BYTES, &params)
    }

    /// Forces the tile kernel whatever `a.n` (tests compare it with the skinny one).
    pub fn tile_product(&self, a: &LinearArgs) -> anyhow::Result<()> {
        self.tile_mma(a)
    }
}
