//! `y = x · Wᵀ` with W quantized: x is `[m, k]` f32, W is `[n, k]` (rows = output features),
//! y is `[m, n]`.
//!
//! Work is split over output columns only, so every output element is one canonical dot
//! product computed by one task (`qgemm`), whatever m is: decode (m = 1) and prefill (m = 512)
//! give the same bits for the same row.

use std::cell::RefCell;
use std::sync::Arc;

use ferrite_model::weights::{DType, Storage, WeightTensor};
use rayon::prelude::*;

use super::qgemm::{self, OutMatrix, Task, FUSED_MAX_ROWS};
use super::simd::Isa;
use crate::quant::{check_row, kernel_row_dequantizer, portable_kernel_row_dequantizer};
use crate::quant::{repack, QuantError, RowDequantizer};

/// Bytes of f32 panel a prefill task aims for: inside L2 next to a block of x rows, and large,
/// because every task reads all of x once.
const PANEL_BYTES: usize = 768 * 1024;
/// Tasks per thread a decode-sized product is cut into (balance against scheduling cost).
const FUSED_TASKS_PER_THREAD: usize = 4;

/// A weight matrix as the kernels read it: quantized rows (in the kernels' layout: the
/// 32-element types repacked with f32 scales, see `quant::repack`) plus their dequantizers.
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    dtype: DType,
    storage: Storage,
    dequantize: RowDequantizer,
    dequantize_portable: RowDequantizer,
    rows: usize,
    cols: usize,
    row_bytes: usize,
}

impl QuantMatrix {
    pub fn new(tensor: &WeightTensor) -> Result<Self, QuantError> {
        let (rows, cols, dtype) = (tensor.rows(), tensor.cols(), tensor.dtype);
        let dequantize = kernel_row_dequantizer(dtype)?;
        let dequantize_portable = portable_kernel_row_dequantizer(dtype)?;
        check_row(dtype, cols, dtype.row_bytes(cols))?;
        if cols % 16 != 0 {
            // Float rows are decoded 16 at a time, quantized ones by whole blocks (32 or 256).
            return Err(QuantError::RaggedRow { dtype, cols });
        }
        let total = tensor.storage.bytes().len();
        if total != rows * dtype.row_bytes(cols) {
            return Err(QuantError::WrongByteCount {
                dtype,
                cols: rows * cols,
                expected: rows * dtype.row_bytes(cols),
                got: total,
            });
        }
        let storage = match repack::repack(dtype, tensor.storage.bytes()) {
            Some(repacked) => Storage::Owned(Arc::new(repacked)),
            None => tensor.storage.clone(),
        };
        Ok(QuantMatrix {
            dtype,
            storage,
            dequantize,
            dequantize_portable,
            rows,
            cols,
            row_bytes: repack::row_bytes(dtype, cols),
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    /// The first `n` rows as a matrix of their own, sharing the storage (rows are stored back
    /// to back, so a prefix of rows is a prefix of the bytes).
    pub fn first_rows(&self, n: usize) -> QuantMatrix {
        QuantMatrix {
            rows: n.min(self.rows),
            ..self.clone()
        }
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Bytes of one quantized row, in the kernels' layout.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }
    /// All rows, quantized, back to back, in the kernels' layout.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Dequantizes rows `first..first + count` into `out` (`count * cols` long).
    pub fn dequantize_rows(&self, first: usize, count: usize, out: &mut [f32]) {
        let bytes = &self.bytes()[first * self.row_bytes..(first + count) * self.row_bytes];
        (self.dequantize)(bytes, &mut out[..count * self.cols]);
    }

    /// As [`Self::dequantize_rows`], with the scalar reference dequantizer.
    pub fn dequantize_rows_portable(&self, first: usize, count: usize, out: &mut [f32]) {
        let bytes = &self.bytes()[first * self.row_bytes..(first + count) * self.row_bytes];
        (self.dequantize_portable)(bytes, &mut out[..count * self.cols]);
    }
}

/// One product of a grouped matmul: `out = x · matrixᵀ`, `out` is `[m, matrix.rows()]`.
pub struct MatmulJob<'a> {
    pub matrix: &'a QuantMatrix,
    pub out: &'a mut [f32],
}

thread_local! {
    static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Weight rows per task: small enough to spread over the threads, large enough to amortise
/// the task's start.
fn rows_per_task(m: usize, k: usize, n: usize) -> usize {
    if m <= FUSED_MAX_ROWS {
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
    let k = first.matrix.cols;
    assert!(x.len() >= m * k, "matmul: x is shorter than m * k");
    let mut tasks = Vec::new();
    for job in jobs.iter_mut() {
        assert_eq!(
            job.matrix.cols, k,
            "matmul: matrices of one group must share k"
        );
        let n = job.matrix.rows;
        assert!(
            job.out.len() >= m * n,
            "matmul: output is shorter than m * n"
        );
        let out = OutMatrix {
            ptr: job.out.as_mut_ptr(),
            len: job.out.len(),
            n,
        };
        let step = rows_per_task(m, k, n);
        tasks.extend((0..n).step_by(step).map(|c0| Task {
            matrix: job.matrix,
            x,
            m,
            c0,
            c1: (c0 + step).min(n),
            out,
        }));
    }
    let run = |task: &Task<'_>| PANEL.with(|panel| qgemm::run(isa, task, &mut panel.borrow_mut()));
    if tasks.len() == 1 {
        run(&tasks[0]);
    } else {
        tasks.par_iter().for_each(run);
    }
}

/// A single product: `out = x · matrixᵀ`.
pub fn matmul(isa: Isa, x: &[f32], m: usize, matrix: &QuantMatrix, out: &mut [f32]) {
    matmul_group(isa, x, m, &mut [MatmulJob { matrix, out }]);
}
