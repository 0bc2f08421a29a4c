//! `y = x · Wᵀ` with W quantized: x is `[m, k]` f32, W is `[n, k]` (rows = output features),
//! y is `[m, n]`.
//!
//! Work is split over output columns only, so every output element is one canonical dot
//! product computed by one task (`qgemm`), whatever m is: decode (m = 1) and prefill (m = 512)
//! give the same bits for the same row.

use std::cell::RefCell;

use rayon::prelude::*;

use super::bf16_activations::Bf16Activations;
use super::bf16_decode;
use super::bf16_gemm;
use super::int8_gemm;
use super::q8_activations::Q8Activations;
use super::qgemm::{self, fused_max_rows, OutMatrix, Rounded, Task};
use super::quant_matrix::{ProductPath, QuantMatrix};
use crate::simd::Isa;

/// Bytes of f32 panel a prefill task aims for: inside L2 next to a block of x rows, and large,
/// because every task reads all of x once.
const PANEL_BYTES: usize = 768 * 1024;
/// Tasks per thread a decode-sized product is cut into (balance against scheduling cost).
const FUSED_TASKS_PER_THREAD: usize = 4;

/// One product of a grouped matmul: `out = x · matrixᵀ`, `out` is `[m, matrix.rows()]`.
pub struct MatmulJob<'a> {
    pub matrix: &'a QuantMatrix,
    pub out: &'a mut [f32],
}

thread_local! {
    static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Buffers of rounded inputs, reused from call to call on the calling thread.
    static ROUNDED: RefCell<RoundedPool> = RefCell::new(RoundedPool::default());
}

/// The rounded inputs of one call to [`matmul_segments`].
#[derive(Default)]
struct RoundedPool {
    int8: Vec<Q8Activations>,
    bf16: Vec<Bf16Activations>,
}

/// Weight rows per task: small enough to spread over the threads, large enough to amortise
/// the task's start.
fn rows_per_task(isa: Isa, m: usize, k: usize, n: usize, kernel: Kernel) -> usize {
    if kernel == Kernel::Bf16Tiles {
        // Whole groups of 16 weight rows (AMX tiles), a bf16 panel of about the f32 one's
        // bytes, and several tasks per thread where the matrix has few rows.
        let tasks = rayon::current_num_threads() * FUSED_TASKS_PER_THREAD;
        let most = (PANEL_BYTES / 2 / k.max(1)).clamp(32, 512);
        return n.div_ceil(tasks).clamp(16, most).next_multiple_of(16);
    }
    if m <= fused_max_rows(isa) {
        let tasks = rayon::current_num_threads() * FUSED_TASKS_PER_THREAD;
        n.div_ceil(tasks).next_multiple_of(4).max(16)
    } else {
        // As many rows as the panel holds, but a whole number of tasks per thread, so that
        // no thread idles at the end of the product.
        let most = (PANEL_BYTES / 4 / k.max(1)).clamp(4, 256);
        let threads = rayon::current_num_threads().max(1);
        let tasks = n.div_ceil(most).div_ceil(threads) * threads;
        n.div_ceil(tasks).next_multiple_of(4).max(4)
    }
}

/// Runs several products of the same `x` (`[m, k]`) in one parallel region (Q/K/V, gate/up).
/// Every matrix must have `k` columns and every `out` `m * rows` elements.
pub fn matmul_group(isa: Isa, x: &[f32], m: usize, jobs: &mut [MatmulJob<'_>]) {
    let Some(first) = jobs.first() else { return };
    let k = first.matrix.cols();
    let mut segments: Vec<SegmentJob<'_>> = jobs
        .iter_mut()
        .map(|job| {
            assert_eq!(
                job.matrix.cols(),
                k,
                "matmul: matrices of one group must share k"
            );
            SegmentJob {
                x,
                m,
                matrix: job.matrix,
                out: &mut *job.out,
            }
        })
        .collect();
    matmul_segments(isa, &mut segments);
}

/// One product of a segmented matmul: `out = x · matrixᵀ` with its own `x` (`[m, k]`).
pub struct SegmentJob<'a> {
    pub x: &'a [f32],
    pub m: usize,
    pub matrix: &'a QuantMatrix,
    pub out: &'a mut [f32],
}

/// Runs products of different inputs in one parallel region: the experts of a mixture, each
/// over the tokens routed to it. Tasks are cut by weight rows within each product, so threads
/// spread over products and rows alike, and every output element stays one canonical dot
/// product (the same bits whatever the other jobs are).
pub fn matmul_segments(isa: Isa, jobs: &mut [SegmentJob<'_>]) {
    // Each job's input as its matrix's path reads it, rounded once per distinct input (a
    // group's jobs share their x).
    let mut pool = ROUNDED.with(|pool| std::mem::take(&mut *pool.borrow_mut()));
    // (input, rows, kernel) rounded so far, and where each went in its kernel's pool.
    let mut done: Vec<((*const f32, usize, Kernel), usize)> = Vec::new();
    let (mut int8_used, mut bf16_used) = (0, 0);
    let mut rounded_of_job = Vec::with_capacity(jobs.len());
    for job in jobs.iter() {
        let kernel = kernel_of(isa, job);
        if job.m == 0 || kernel == Kernel::Exact {
            rounded_of_job.push(None);
            continue;
        }
        let (key, k) = ((job.x.as_ptr(), job.m, kernel), job.matrix.cols());
        let index = match done.iter().find(|d| d.0 == key) {
            Some(&(_, index)) => index,
            None if kernel == Kernel::Int8 => {
                pool.int8
                    .resize_with(pool.int8.len().max(int8_used + 1), Default::default);
                pool.int8[int8_used].quantize(job.x, job.m, k);
                int8_used += 1;
                int8_used - 1
            }
            None => {
                pool.bf16
                    .resize_with(pool.bf16.len().max(bf16_used + 1), Default::default);
                let acts = &mut pool.bf16[bf16_used];
                if kernel == Kernel::Bf16Decode {
                    acts.convert_with_sums(job.x, job.m, k);
                } else {
                    acts.convert(job.x, job.m, k);
                }
                bf16_used += 1;
                bf16_used - 1
            }
        };
        done.push((key, index));
        rounded_of_job.push(Some((kernel, index)));
    }
    let mut tasks = Vec::new();
    for (job, rounded) in jobs.iter_mut().zip(rounded_of_job) {
        let (m, k, n) = (job.m, job.matrix.cols(), job.matrix.rows());
        if m == 0 {
            continue;
        }
        assert!(job.x.len() >= m * k, "matmul: x is shorter than m * k");
        assert!(
            job.out.len() >= m * n,
            "matmul: output is shorter than m * n"
        );
        let out = OutMatrix {
            ptr: job.out.as_mut_ptr(),
            len: job.out.len(),
            n,
        };
        let acts = match rounded {
            None => Rounded::Exact,
            Some((Kernel::Int8, i)) => Rounded::Int8(&pool.int8[i]),
            Some((Kernel::Bf16Decode, i)) => Rounded::Bf16Decode(&pool.bf16[i]),
            Some((_, i)) => Rounded::Bf16(&pool.bf16[i]),
        };
        let step = rows_per_task(isa, m, k, n, kernel_of(isa, job));
        tasks.extend((0..n).step_by(step).map(|c0| Task {
            matrix: job.matrix,
            x: job.x,
            m,
            c0,
            c1: (c0 + step).min(n),
            out,
            acts,
        }));
    }
    let run = |task: &Task<'_>| match task.acts {
        Rounded::Int8(acts) => int8_gemm::run(isa, task, acts),
        Rounded::Bf16(acts) => bf16_gemm::run(task, acts),
        Rounded::Bf16Decode(acts) => bf16_decode::run(task, acts),
        Rounded::Exact => PANEL.with(|panel| qgemm::run(isa, task, &mut panel.borrow_mut())),
    };
    match tasks.len() {
        0 => {}
        1 => run(&tasks[0]),
        _ => tasks.par_iter().for_each(run),
    }
    drop(tasks);
    ROUNDED.with(|p| *p.borrow_mut() = pool);
}

/// Rows of x up to which a bf16-path product of Q4_K/Q6_K takes `bf16_decode`: one. Measured
/// on a Xeon with AMX (docs/performance.md, '2026-12-07 04:45 UTC'): 1.14-2.0x the exact
/// kernels at one row, 0.78-1.06x at four, 0.72-0.84x at sixteen.
const BF16_DECODE_MAX_ROWS: usize = 1;

/// The kernel a product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Exact,
    Int8,
    /// AMX tiles (`bf16_gemm`).
    Bf16Tiles,
    /// `vdpbf16ps` on the quants as they are (`bf16_decode`).
    Bf16Decode,
}

/// The kernel of a product on its matrix's path. On the bf16 path, products of few rows
/// (decode) do not take AMX tiles, which would first widen every weight to bf16 in memory at
/// a cost above the products': the types `bf16_decode` knows take it, the others the exact
/// fused kernels, which also read the quantized weights straight.
fn kernel_of(isa: Isa, job: &SegmentJob<'_>) -> Kernel {
    match job.matrix.path() {
        ProductPath::Exact => Kernel::Exact,
        ProductPath::Int8 => Kernel::Int8,
        ProductPath::Bf16 if job.m > fused_max_rows(isa) => Kernel::Bf16Tiles,
        ProductPath::Bf16
            if job.m <= BF16_DECODE_MAX_ROWS
                && bf16_decode::supports(job.matrix.dtype())
                && bf16_decode::available() =>
        {
            Kernel::Bf16Decode
        }
        ProductPath::Bf16 => Kernel::Exact,
    }
}

/// A single product: `out = x · matrixᵀ`.
pub fn matmul(isa: Isa, x: &[f32], m: usize, matrix: &QuantMatrix, out: &mut [f32]) {
    matmul_group(isa, x, m, &mut [MatmulJob { matrix, out }]);
}
