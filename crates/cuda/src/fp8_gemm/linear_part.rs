//! An FP8 linear layer part (crate::gemm) through [`Fp8Gemm`]: the tokens' activations
//! quantized into the scratch as many at a time as it holds, then multiplied.

use std::sync::atomic::Ordering;

use super::{Fp8Gemm, Fp8Operands, Fp8Output};
use crate::buffer::Scratch;
use crate::device_ptr::DevicePtr;
use crate::kernels::{Kernels, FP8_BLOCK};
use crate::linear::Matrix;

/// Room the scratch leaves between its regions, so each starts 256-byte aligned.
const ALIGN: usize = 256;

fn align_up(bytes: usize) -> usize {
    bytes.div_ceil(ALIGN) * ALIGN
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
        let out_bytes = match self.output {
            Fp8Output::F32 => 0,
            Fp8Output::Bf16 => 2 * rows,
        };
        let per_token = k + 4 * (k / FP8_BLOCK) + out_bytes;
        let chunk = scratch.bytes.saturating_sub(3 * ALIGN) / per_token;
        anyhow::ensure!(
            chunk > 0,
            "the scratch holds no token of an FP8 product of k = {k}"
        );
        // Chunk c's quantized tokens, their scales and (bf16 output) product in the scratch.
        let regions = |c: usize| {
            let q_scales = scratch.ptr.offset(align_up(c * k));
            (
                scratch.ptr,
                q_scales,
                q_scales.offset(align_up(4 * c * (k / FP8_BLOCK))),
            )
        };
        let operands = |t0: usize, c: usize| {
            let (q, q_scales, out) = regions(c);
            Fp8Operands {
                w: w_bytes,
                w_scales: w_scales_by_k,
                x: q,
                x_scales: q_scales,
                y: match self.output {
                    Fp8Output::F32 => y.offset(4 * t0 * ldy),
                    Fp8Output::Bf16 => out,
                },
                n: c,
                rows,
                k,
                ldy,
            }
        };
        // Before anything is launched: whether cuBLASLt takes the chunks' shapes. The first
        // chunk's descriptors then serve its launch (the others', rare, are made again).
        let mut first = None;
        for c in [chunk.min(n), n % chunk] {
            if c > 0 {
                match self.algorithm(&operands(0, c), self.output) {
                    Ok(prepared) => {
                        first.get_or_insert(prepared);
                    }
                    Err(e) => {
                        if !self.warned.swap(true, Ordering::Relaxed) {
                            tracing::warn!("FP8 product {c}x{rows}x{k} dequantized instead: {e}");
                        }
                        return Ok(false);
                    }
                }
            }
        }
        let mut t0 = 0;
        while t0 < n {
            let c = chunk.min(n - t0);
            let (q, q_scales, out) = regions(c);
            kernels.fp8_quantize_rows(x.offset(2 * t0 * k), q, q_scales, c, k)?;
            match first.take() {
                Some((d, algo)) => self.enqueue(&d, &algo, &operands(t0, c))?,
                None => self.product(&operands(t0, c))?,
            }
            if self.output == Fp8Output::Bf16 {
                kernels.widen_bf16_rows(out, y.offset(4 * t0 * ldy), c, rows, ldy)?;
            }
            t0 += c;
        }
        Ok(true)
    }
}
