//! `y = x · Wᵀ` with W quantized: x is `[m, k]` f32, W is `[n, k]` (rows = output features),
//! y is `[m, n]`.
//!
//! Work is split over output columns only. A task dequantizes a panel of weight rows into a
//! thread-local f32 buffer once and runs the dot-product micro-kernel over every row of x, so
//! decode (m = 1) and prefill (m = 512) run the same code and every output element is the
//! canonical dot product of `simd`, whatever m is.

use std::cell::RefCell;

use ferrite_model::weights::{DType, WeightTensor};
use rayon::prelude::*;

use super::simd::{Isa, Tile, TILE_COLS, TILE_ROWS};
use crate::quant::{check_row, row_dequantizer, QuantError, RowDequantizer};

/// Bytes of f32 panel a task aims for: comfortably inside L2 next to a few rows of x.
const PANEL_BYTES: usize = 96 * 1024;

/// A weight matrix as the kernels read it: quantized rows plus their dequantizer.
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    tensor: WeightTensor,
    dequantize: RowDequantizer,
    rows: usize,
    cols: usize,
    row_bytes: usize,
}

impl QuantMatrix {
    pub fn new(tensor: &WeightTensor) -> Result<Self, QuantError> {
        let (rows, cols) = (tensor.rows(), tensor.cols());
        let dequantize = row_dequantizer(tensor.dtype)?;
        let row_bytes = tensor.dtype.row_bytes(cols);
        check_row(tensor.dtype, cols, row_bytes)?;
        let total = tensor.storage.bytes().len();
        if total != rows * row_bytes {
            return Err(QuantError::WrongByteCount {
                dtype: tensor.dtype,
                cols: rows * cols,
                expected: rows * row_bytes,
                got: total,
            });
        }
        Ok(QuantMatrix {
            tensor: tensor.clone(),
            dequantize,
            rows,
            cols,
            row_bytes,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn dtype(&self) -> DType {
        self.tensor.dtype
    }

    /// Dequantizes rows `first..first + count` into `out` (`count * cols` long).
    pub fn dequantize_rows(&self, first: usize, count: usize, out: &mut [f32]) {
        let bytes =
            &self.tensor.storage.bytes()[first * self.row_bytes..(first + count) * self.row_bytes];
        (self.dequantize)(bytes, &mut out[..count * self.cols]);
    }
}

/// One product of a grouped matmul: `out = x · matrixᵀ`, `out` is `[m, matrix.rows()]`.
pub struct MatmulJob<'a> {
    pub matrix: &'a QuantMatrix,
    pub out: &'a mut [f32],
}

/// Lets tasks write disjoint columns of the same row-major output.
#[derive(Clone, Copy)]
struct OutPtr {
    ptr: *mut f32,
    len: usize,
}
// SAFETY: every task writes a column range no other task writes (see `matmul_group`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

thread_local! {
    static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

fn panel_rows(k: usize) -> usize {
    let rows = (PANEL_BYTES / 4 / k.max(1)).clamp(TILE_COLS, 64);
    rows / TILE_COLS * TILE_COLS
}

/// Runs several products of the same `x` (`[m, k]`) in one parallel region (Q/K/V, gate/up).
/// Every matrix must have `k` columns and every `out` `m * rows` elements.
pub fn matmul_group(isa: Isa, x: &[f32], m: usize, jobs: &mut [MatmulJob<'_>]) {
    let Some(first) = jobs.first() else { return };
    let k = first.matrix.cols;
    assert!(x.len() >= m * k, "matmul: x is shorter than m * k");
    let mut tasks = Vec::new();
    let mut outs = Vec::with_capacity(jobs.len());
    for (j, job) in jobs.iter_mut().enumerate() {
        assert_eq!(
            job.matrix.cols, k,
            "matmul: matrices of one group must share k"
        );
        let n = job.matrix.rows;
        assert!(
            job.out.len() >= m * n,
            "matmul: output is shorter than m * n"
        );
        outs.push(OutPtr {
            ptr: job.out.as_mut_ptr(),
            len: job.out.len(),
        });
        let step = panel_rows(k);
        tasks.extend((0..n).step_by(step).map(|c| (j, c, (c + step).min(n))));
    }
    let matrices: Vec<&QuantMatrix> = jobs.iter().map(|j| j.matrix).collect();
    let run = |&(j, c0, c1): &(usize, usize, usize)| {
        let matrix = matrices[j];
        let out = outs[j];
        PANEL.with(|panel| {
            let mut panel = panel.borrow_mut();
            if panel.len() < (c1 - c0) * k {
                panel.resize((c1 - c0) * k, 0.0);
            }
            matrix.dequantize_rows(c0, c1 - c0, &mut panel);
            panel_times_x(isa, x, m, k, &panel, c0, c1, matrix.rows, out);
        });
    };
    if tasks.len() == 1 {
        run(&tasks[0]);
    } else {
        tasks.par_iter().for_each(run);
    }
}

/// `out[r, c0 + c] = dot(x[r], panel[c])` for all rows r < m and panel rows c < c1 - c0.
#[allow(clippy::too_many_arguments)]
fn panel_times_x(
    isa: Isa,
    x: &[f32],
    m: usize,
    k: usize,
    panel: &[f32],
    c0: usize,
    c1: usize,
    n: usize,
    out: OutPtr,
) {
    for r0 in (0..m).step_by(TILE_ROWS) {
        let rows = TILE_ROWS.min(m - r0);
        for c in (c0..c1).step_by(TILE_COLS) {
            let cols = TILE_COLS.min(c1 - c);
            let tile = Tile {
                x: &x[r0 * k..(r0 + rows) * k],
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
                    let index = (r0 + r) * n + c + cc;
                    assert!(index < out.len, "matmul: output index out of bounds");
                    // SAFETY: in bounds (checked); columns c0..c1 of this output are written by
                    // this task alone, and the buffer outlives the parallel region because
                    // `jobs` is borrowed mutably for all of it.
                    unsafe { out.ptr.add(index).write(v) };
                }
            }
        }
    }
}

/// A single product: `out = x · matrixᵀ`.
pub fn matmul(isa: Isa, x: &[f32], m: usize, matrix: &QuantMatrix, out: &mut [f32]) {
    matmul_group(isa, x, m, &mut [MatmulJob { matrix, out }]);
}
