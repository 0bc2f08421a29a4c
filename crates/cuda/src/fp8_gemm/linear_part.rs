//! An FP8 linear layer part (crate::gemm) through [`Fp8Gemm`]: the tokens' activations
//! quantized into the scratch as many at a time as it holds, then multiplied.

use std::sync::atomic::Ordering;

use super::{Fp8Gemm, Fp8Operands};
use crate::buffer::Scratch;
use crate::device_ptr::DevicePtr;
use crate::launchers::{Kernels, FP8_BLOCK};
use crate::linear::Matrix;

/// Room the scratch leaves between its regions, so each starts 256-byte aligned.
const ALIGN: usize = 256;

fn align_up(bytes: usize) -> usize {
    bytes.div_ceil(ALIGN) * ALIGN
}

/// cuBLASLt's block-scaled FP8 products take token counts that are multiples of 4 and refuse
/// the others, whatever the shape (probed: docs/performance.md, '2026-12-05 13:11-13:14 UTC,
/// the same on the H100 after the fixes').
const TOKEN_STEP: usize = 4;

/// A run of tokens multiplied at once: `c` tokens from `t0`, padded to a multiple of
/// [`TOKEN_STEP`] (with zero rows) when `c` is not one, the product then written to the
/// scratch and copied.
#[derive(Debug, Clone, Copy)]
struct Piece {
    t0: usize,
    c: usize,
}

impl Piece {
    fn padded(self) -> usize {
        self.c.div_ceil(TOKEN_STEP) * TOKEN_STEP
    }
}

impl Fp8Gemm {
    /// y[n, rows] (f32, row stride `ldy`) = x[n, k] (bf16) · W^T for an FP8 matrix `w` with
    /// its block-major scales (plane 2, crate::weights): the tokens quantized into `scratch`
    /// as many at a time as it holds. `Ok(false)`, before anything is launched, when cuBLASLt
    /// has no algorithm for the shape (the caller then dequantizes).
    #[allow(clippy::too_many_arguments)]
    pub fn linear_part(
        &self,
        kernels: &Kernels,
        x: DevicePtr,
        w: &Matrix,
        y: DevicePtr,
        n: usize,
        rows: usize,
        k: usize,
        ldy: usize,
        scratch: Scratch,
    ) -> anyhow::Result<bool> {
        // Plane 0, the row-major scales, serves the GEMVs.
        let (Some(w_bytes), Some(w_scales_by_k)) = (w.planes[1], w.planes[2]) else {
            anyhow::bail!("an FP8 matrix without its block-major scales");
        };
        let room = scratch.bytes.saturating_sub(3 * ALIGN);
        // Scratch regions of `c` quantized tokens: bytes, scales, and a padded product.
        let regions = |c: usize| {
            let q_scales = scratch.ptr.offset(align_up(c * k));
            let out = q_scales.offset(align_up(4 * c * (k / FP8_BLOCK)));
            (scratch.ptr, q_scales, out)
        };
        let bytes = |c: usize, padded: bool| {
            align_up(c * k)
                + align_up(4 * c * (k / FP8_BLOCK))
                + if padded { 4 * c * rows } else { 0 }
        };
        let chunk = room / (k + 4 * (k / FP8_BLOCK)) / TOKEN_STEP * TOKEN_STEP;
        anyhow::ensure!(
            chunk > 0 && bytes(TOKEN_STEP, true) <= room,
            "the scratch holds too few tokens of an FP8 product of k = {k}"
        );
        // One padded piece when it fits (a step of a few tokens reads the weights once), else
        // whole steps straight into y and the last 1..3 tokens padded.
        let mut pieces = Vec::new();
        let whole = Piece { t0: 0, c: n };
        if !n.is_multiple_of(TOKEN_STEP) && bytes(whole.padded(), true) <= room {
            pieces.push(whole);
        } else {
            let mut t0 = 0;
            while n - t0 >= TOKEN_STEP {
                let c = chunk.min((n - t0) / TOKEN_STEP * TOKEN_STEP);
                pieces.push(Piece { t0, c });
                t0 += c;
            }
            if t0 < n {
                pieces.push(Piece { t0, c: n - t0 });
            }
        }
        let operands = |p: Piece| {
            let m = p.padded();
            let (q, q_scales, out) = regions(m);
            let (y, ldy) = if m == p.c {
                (y.offset(4 * p.t0 * ldy), ldy)
            } else {
                (out, rows)
            };
            Fp8Operands {
                w: w_bytes,
                w_scales: w_scales_by_k,
                x: q,
                x_scales: q_scales,
                y,
                n: m,
                rows,
                k,
                ldy,
            }
        };
        // Before anything is launched: whether cuBLASLt takes every piece's shape (the
        // descriptors and algorithm made for the check then serve the launch).
        let mut prepared = Vec::with_capacity(pieces.len());
        for &p in &pieces {
            match self.algorithm(&operands(p)) {
                Ok(ready) => prepared.push(ready),
                Err(e) => {
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!("FP8 product {}x{rows}x{k} dequantized instead: {e}", p.c);
                    }
                    return Ok(false);
                }
            }
        }
        for (p, ready) in pieces.into_iter().zip(&prepared) {
            let m = p.padded();
            let (q, q_scales, out) = regions(m);
            kernels.fp8_quantize_rows(x.offset(2 * p.t0 * k), q, q_scales, m, p.c, k)?;
            self.enqueue(ready, &operands(p))?;
            if m != p.c {
                kernels.copy_rows_f32(out, y.offset(4 * p.t0 * ldy), p.c, rows, ldy)?;
            }
        }
        Ok(true)
    }
}
