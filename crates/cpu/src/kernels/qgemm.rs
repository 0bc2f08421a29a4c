//! One task of `y = x · Wᵀ`: output columns `c0..c1` (weight rows) for every row of `x`.
//!
//! Two ways to compute the same canonical dot products:
//! - fused (few rows of x: decode of up to 16 streams on AVX-512, 4 elsewhere, and speculative
//!   verification): each weight block is decoded into registers and multiplied into a group of
//!   4 or 8 x rows right away, so the weights are read straight from their quantized bytes,
//!   once per group (at 8 to 16 rows this beats the panel's f32 round trip through L2;
//!   measured: docs/performance.md, '2026-12-04 23:30 UTC, decode of 5-16 streams on the
//!   fused kernels');
//! - panel (prefill): the task's weight rows are decoded once into an f32 panel, then register
//!   tiles of x rows × panel rows run over it.
//!
//! Both accumulate the same decoded values in the same lane order, so the result does not
//! depend on which one ran, i.e. on how many tokens share the step.

use ferrite_model::weights::DType;

use super::bf16_activations::Bf16Activations;
use super::q8_activations::Q8Activations;
use super::quant_matrix::QuantMatrix;
use crate::simd::{Isa, Tile, MAX_TILE_COLS, MAX_TILE_ROWS};

/// Bytes of x rows a prefill task keeps hot while the panel's column tiles pass over them.
const X_BLOCK_BYTES: usize = 256 * 1024;

/// At most this many rows of x take the fused path: on AVX-512, in groups of 8 (and 4), where
/// a weight block decoded once serves 8 rows; elsewhere 4.
pub fn fused_max_rows(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 16,
        _ => 4,
    }
}

/// A row-major `[m, n]` output that several tasks write disjoint columns of.
#[derive(Clone, Copy)]
pub struct OutMatrix {
    pub ptr: *mut f32,
    pub len: usize,
    /// Elements per row (the matrix's output features).
    pub n: usize,
}
// SAFETY: every task writes a column range no other task writes (see `matmul_group`).
unsafe impl Send for OutMatrix {}
unsafe impl Sync for OutMatrix {}

impl OutMatrix {
    /// SAFETY: the caller owns column `c` of this output for the duration of the task.
    #[inline(always)]
    pub(crate) unsafe fn write(&self, row: usize, c: usize, v: f32) {
        let index = row * self.n + c;
        assert!(index < self.len, "matmul: output index out of bounds");
        self.ptr.add(index).write(v);
    }

    /// Writes `values` to row `row`, columns `c..c + values.len()`.
    ///
    /// SAFETY: the caller owns those columns for the duration of the task.
    #[inline(always)]
    pub(crate) unsafe fn write_run(&self, row: usize, c: usize, values: &[f32]) {
        let index = row * self.n + c;
        assert!(
            c + values.len() <= self.n && index + values.len() <= self.len,
            "matmul: output run out of bounds"
        );
        std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(index), values.len());
    }
}

/// Columns `c0..c1` of `out = x · matrixᵀ`; `x` is `[m, k]` with `k = matrix.cols()`.
pub struct Task<'a> {
    pub matrix: &'a QuantMatrix,
    pub x: &'a [f32],
    pub m: usize,
    pub c0: usize,
    pub c1: usize,
    pub out: OutMatrix,
    /// x as the matrix's path reads it: rounded to bf16 or quantized to int8, a task that
    /// `bf16_gemm` or `int8_gemm` runs, not `run`.
    pub acts: Rounded<'a>,
}

/// A product's input after its path rounded it (`Exact`: x itself).
#[derive(Clone, Copy)]
pub enum Rounded<'a> {
    Exact,
    /// Padded to AMX tiles (`bf16_gemm`).
    Bf16(&'a Bf16Activations),
    /// Unpadded, with sums per 16 elements (`bf16_decode`).
    Bf16Decode(&'a Bf16Activations),
    Int8(&'a Q8Activations),
}

pub fn run(isa: Isa, task: &Task<'_>, panel: &mut Vec<f32>) {
    let k = task.matrix.cols();
    assert!(
        task.x.len() >= task.m * k,
        "matmul: x is shorter than m * k"
    );
    assert!(task.c1 <= task.matrix.rows() && task.out.len >= task.m * task.out.n);
    match isa {
        // SAFETY: these ISAs are only used when detected; shapes checked above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::task_avx512(task, panel) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { x86::task_avx2(task, panel) },
        _ => {
            let portable = |panel: &[f32], c0: usize, c1: usize| {
                // SAFETY: columns c0..c1 belong to this task.
                unsafe { panel_tiles(Isa::Portable, task, panel, c0, c1) }
            };
            with_scalar_panel(task, panel, portable);
        }
    }
}

/// Decodes the task's weight rows with the scalar dequantizer, then hands the panel on.
fn with_scalar_panel(task: &Task<'_>, panel: &mut Vec<f32>, tiles: impl Fn(&[f32], usize, usize)) {
    let k = task.matrix.cols();
    let count = task.c1 - task.c0;
    if panel.len() < count * k {
        panel.resize(count * k, 0.0);
    }
    task.matrix
        .dequantize_rows_portable(task.c0, count, &mut panel[..count * k]);
    tiles(&panel[..count * k], task.c0, task.c1);
}

/// Tiles of x rows × panel rows over an f32 panel holding weight rows `c0..c1`.
///
/// SAFETY: columns `c0..c1` of `task.out` belong to the caller.
#[inline(always)]
unsafe fn panel_tiles(isa: Isa, task: &Task<'_>, panel: &[f32], c0: usize, c1: usize) {
    let k = task.matrix.cols();
    let (tile_rows, tile_cols) = tile_shape(isa);
    // Blocks of x rows small enough to stay in L2 beside the panel while every column tile of
    // the panel passes over them: x is then read from memory once per panel.
    let block_rows = (X_BLOCK_BYTES / 4 / k.max(1)).max(tile_rows) / tile_rows * tile_rows;
    for b0 in (0..task.m).step_by(block_rows) {
        let b1 = (b0 + block_rows).min(task.m);
        for c in (c0..c1).step_by(tile_cols) {
            let cols = tile_cols.min(c1 - c);
            for r0 in (b0..b1).step_by(tile_rows) {
                let rows = tile_rows.min(b1 - r0);
                let tile = Tile {
                    x: &task.x[r0 * k..(r0 + rows) * k],
                    x_stride: k,
                    rows,
                    w: &panel[(c - c0) * k..(c - c0 + cols) * k],
                    w_stride: k,
                    cols,
                    k,
                };
                let sums = tile.compute(isa);
                for (r, row) in sums.iter().enumerate().take(rows) {
                    for (cc, &v) in row.iter().enumerate().take(cols) {
                        task.out.write(r0 + r, c + cc, v);
                    }
                }
            }
        }
    }
}

fn tile_shape(isa: Isa) -> (usize, usize) {
    match isa {
        // 24 accumulators, 4 weight vectors and an x vector: 29 of the 32 registers.
        Isa::Avx512 => (MAX_TILE_ROWS, MAX_TILE_COLS),
        Isa::Avx2Fma => (2, 2),
        Isa::Portable => (1, 1),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use crate::quant::decode::{self, BlockFormat};
    use crate::simd::vec16::{Avx2, Avx512, Vec16};
    use crate::simd::{prefetch_lines, TO_L1, TO_L2};

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub unsafe fn task_avx512(task: &Task<'_>, panel: &mut Vec<f32>) {
        by_format::<Avx512>(Isa::Avx512, task, panel)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn task_avx2(task: &Task<'_>, panel: &mut Vec<f32>) {
        by_format::<Avx2>(Isa::Avx2Fma, task, panel)
    }

    #[inline(always)]
    unsafe fn by_format<S: Vec16>(isa: Isa, task: &Task<'_>, panel: &mut Vec<f32>) {
        match task.matrix.dtype() {
            DType::Q4_0 => by_rows::<S, decode::Q4_0>(isa, task, panel),
            DType::Q4_1 => by_rows::<S, decode::Q4_1>(isa, task, panel),
            DType::Q5_0 => by_rows::<S, decode::Q5_0>(isa, task, panel),
            DType::Q5_1 => by_rows::<S, decode::Q5_1>(isa, task, panel),
            DType::Q8_0 => by_rows::<S, decode::Q8_0>(isa, task, panel),
            DType::Q4_K => by_rows::<S, decode::Q4K>(isa, task, panel),
            DType::Q5_K => by_rows::<S, decode::Q5K>(isa, task, panel),
            DType::Q6_K => by_rows::<S, decode::Q6K>(isa, task, panel),
            DType::F32 => by_rows::<S, decode::F32>(isa, task, panel),
            DType::F16 => by_rows::<S, decode::F16>(isa, task, panel),
            DType::BF16 => by_rows::<S, decode::Bf16>(isa, task, panel),
            DType::Fp8 => by_rows::<S, decode::Fp8>(isa, task, panel),
            _ => with_scalar_panel(task, panel, |panel, c0, c1| {
                panel_tiles(isa, task, panel, c0, c1)
            }),
        }
    }

    #[inline(always)]
    unsafe fn by_rows<S: Vec16, F: BlockFormat>(isa: Isa, task: &Task<'_>, panel: &mut Vec<f32>) {
        if task.m <= fused_max_rows(isa) {
            fused::<S, F>(task);
        } else {
            decode_panel::<S, F>(task, panel);
            let k = task.matrix.cols();
            let count = task.c1 - task.c0;
            panel_tiles(isa, task, &panel[..count * k], task.c0, task.c1);
        }
    }

    /// Decodes weight rows `c0..c1` into `panel` (`[c1 - c0, k]`).
    #[inline(always)]
    unsafe fn decode_panel<S: Vec16, F: BlockFormat>(task: &Task<'_>, panel: &mut Vec<f32>) {
        let m = task.matrix;
        let (k, count) = (m.cols(), task.c1 - task.c0);
        if panel.len() < count * k {
            panel.resize(count * k, 0.0);
        }
        let (bytes, row_bytes) = (m.bytes().as_ptr(), m.row_bytes());
        let out = panel.as_mut_ptr();
        for row in 0..count {
            let src = bytes.add((task.c0 + row) * row_bytes);
            let dst = out.add(row * k);
            for b in 0..k / F::ELEMS {
                let block_out = dst.add(b * F::ELEMS);
                F::decode::<S>(
                    src.add(b * F::BYTES),
                    #[inline(always)]
                    |chunk, v| S::store(block_out.add(16 * chunk), v),
                );
            }
        }
    }

    /// Fused path: weight rows in groups of `S::FUSED_COLS`, x rows in groups of up to 4, or
    /// 8 over pairs of weight rows (`S::FUSED_WIDE`).
    #[inline(always)]
    unsafe fn fused<S: Vec16, F: BlockFormat>(task: &Task<'_>) {
        let mut c = task.c0;
        while c < task.c1 {
            let cols = S::FUSED_COLS.min(task.c1 - c);
            let mut r0 = 0;
            while r0 < task.m {
                let left = task.m - r0;
                let rows = if S::FUSED_WIDE && left >= 8 {
                    8
                } else {
                    4.min(left)
                };
                macro_rules! shapes {
                    ($(($r:literal, $c:literal)),*) => {
                        match (rows, cols) {
                            $(($r, $c) => fused_kernel::<S, F, $r, $c>(task, r0, c),)*
                            (r, _) => {
                                // Tail columns, one weight row at a time.
                                for cc in c..c + cols {
                                    match r {
                                        1 => fused_kernel::<S, F, 1, 1>(task, r0, cc),
                                        2 => fused_kernel::<S, F, 2, 1>(task, r0, cc),
                                        3 => fused_kernel::<S, F, 3, 1>(task, r0, cc),
                                        4 => fused_kernel::<S, F, 4, 1>(task, r0, cc),
                                        _ => fused_kernel::<S, F, 8, 1>(task, r0, cc),
                                    }
                                }
                            }
                        }
                    };
                }
                // `rows` is 8 only where `S::FUSED_WIDE` (the test lets AVX2 drop these shapes).
                if S::FUSED_WIDE && rows == 8 && cols == 4 {
                    fused_kernel::<S, F, 8, 2>(task, r0, c);
                    fused_kernel::<S, F, 8, 2>(task, r0, c + 2);
                } else if cols == S::FUSED_COLS && S::FUSED_COLS == 4 {
                    shapes!((1, 4), (2, 4), (3, 4), (4, 4));
                } else {
                    shapes!((1, 2), (2, 2), (3, 2), (4, 2));
                }
                r0 += rows;
            }
            c += cols;
        }
    }

    /// `MR` x rows from `r0` times `NC` weight rows from `c`, decoded block by block.
    #[inline(always)]
    unsafe fn fused_kernel<S: Vec16, F: BlockFormat, const MR: usize, const NC: usize>(
        task: &Task<'_>,
        r0: usize,
        c: usize,
    ) {
        let m = task.matrix;
        let k = m.cols();
        let (bytes, row_bytes) = (m.bytes().as_ptr(), m.row_bytes());
        let x = task.x.as_ptr().add(r0 * k);
        let mut acc = [[S::zero(); NC]; MR];
        // With three or four x rows the NC rows' blocks are decoded first and multiplied
        // chunk by chunk after, so NC * MR independent accumulators advance side by side
        // (faster on Zen 4 at four rows: docs/performance.md, '2026-12-04 18:16 UTC', "Fused
        // f32 kernel at 3-4 rows"); with one or two, each chunk is multiplied as it is
        // decoded (storing the decoded block costs more than the interleaving gains). Both
        // add the same values to each accumulator in the same order.
        let mut decoded = [[S::zero(); 16]; NC];
        let chunks = F::ELEMS / 16;
        for b in 0..k / F::ELEMS {
            let base = b * F::ELEMS;
            for j in 0..NC {
                let block = bytes.add((c + j) * row_bytes + b * F::BYTES);
                let ahead = block.wrapping_add(2 * NC * row_bytes);
                if F::PREFETCH_TO_L2 {
                    prefetch_lines::<TO_L2>(ahead, F::BYTES);
                } else {
                    prefetch_lines::<TO_L1>(ahead, F::BYTES);
                }
                if MR >= 3 {
                    F::decode::<S>(
                        block,
                        #[inline(always)]
                        |chunk, w| decoded[j][chunk] = w,
                    );
                    continue;
                }
                F::decode::<S>(
                    block,
                    #[inline(always)]
                    |chunk, w| {
                        let offset = base + 16 * chunk;
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let xv = S::load(x.add(r * k + offset));
                            acc[j] = S::fma(xv, w, acc[j]);
                        }
                    },
                );
            }
            if MR >= 3 {
                for chunk in 0..chunks {
                    let offset = base + 16 * chunk;
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let xv = S::load(x.add(r * k + offset));
                        for (acc, decoded) in acc.iter_mut().zip(&decoded) {
                            *acc = S::fma(xv, decoded[chunk], *acc);
                        }
                    }
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (j, &v) in acc.iter().enumerate() {
                task.out.write(r0 + r, c + j, S::reduce(v));
            }
        }
    }
}
