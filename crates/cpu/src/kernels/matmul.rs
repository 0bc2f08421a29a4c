//! `y = x · Wᵀ` with W quantized: x is `[m, k]` f32, W is `[n, k]` (rows = output features),
//! y is `[m, n]`.
//!
//! Work is split over output columns only, so every output element is one canonical dot
//! product computed by one task (`qgemm`), whatever m is: decode (m = 1) and prefill (m = 512)
//! give the same bits for the same row.

use std::cell::RefCell;

use rayon::prelude::*;

use super::int8_gemm;
use super::q8_activations::Q8Activations;
use super::qgemm::{self, fused_max_rows, OutMatrix, Task};
use super::quant_matrix::QuantMatrix;
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
    /// Buffers of int8 activations, reused from call to call on the calling thread.
    static INT8_ACTS: RefCell<Vec<Q8Activations>> = const { RefCell::new(Vec::new()) };
}

/// Weight rows per task: small enough to spread over the threads, large enough to amortise
/// the task's start.
fn rows_per_task(isa: Isa, m: usize, k: usize, n: usize) -> usize {
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
    // The inputs of the matrices that take the int8 path, quantized once each (a group's
    // jobs share their x).
    let mut acts = INT8_ACTS.with(|pool| std::mem::take(&mut *pool.borrow_mut()));
    let mut quantized: Vec<(*const f32, usize)> = Vec::new();
    let mut acts_of_job = Vec::with_capacity(jobs.len());
    for job in jobs.iter() {
        let int8 = job.m > 0 && job.matrix.int8_activations();
        let key = (job.x.as_ptr(), job.m);
        acts_of_job.push(
            int8.then(|| match quantized.iter().position(|q| *q == key) {
                Some(i) => i,
                None => {
                    if acts.len() <= quantized.len() {
                        acts.push(Q8Activations::default());
                    }
                    acts[quantized.len()].quantize(job.x, job.m, job.matrix.cols());
                    quantized.push(key);
                    quantized.len() - 1
                }
            }),
        );
    }
    let mut tasks = Vec::new();
    for (job, acts_index) in jobs.iter_mut().zip(acts_of_job) {
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
        let step = rows_per_task(isa, m, k, n);
        let acts = acts_index.map(|i| &acts[i]);
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
        Some(acts) => int8_gemm::run(isa, task, acts),
        None => PANEL.with(|panel| qgemm::run(isa, task, &mut panel.borrow_mut())),
    };
    match tasks.len() {
        0 => {}
        1 => run(&tasks[0]),
        _ => tasks.par_iter().for_each(run),
    }
    drop(tasks);
    INT8_ACTS.with(|pool| *pool.borrow_mut() = acts);
}

/// A single product: `out = x · matrixᵀ`.
pub fn matmul(isa: Isa, x: &[f32], m: usize, matrix: &QuantMatrix, out: &mut [f32]) {
    matmul_group(isa, x, m, &mut [MatmulJob { matrix, out }]);
}
