//! RMSNorm, row by row: `y = (x / sqrt(mean(x²) + eps)) * weight`, as Hugging Face's
//! LlamaRMSNorm computes it in f32 (the sum of squares is the canonical dot product).
//! Gemma's `(1 + w)` weights are folded into `weight` at load.

use crate::simd::{dot, Isa};

/// `1 / sqrt(mean(x²) + eps)` of one row.
fn inv_rms(isa: Isa, x: &[f32], eps: f32) -> f32 {
    let mean_square = dot(isa, x, x) / x.len() as f32;
    1.0 / (mean_square + eps).sqrt()
}

/// Normalizes each `weight.len()`-long row of `x` into the same row of `out`.
pub fn rms_norm(isa: Isa, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let n = weight.len();
    for (x, y) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let inv_rms = inv_rms(isa, x, eps);
        for ((y, &x), &w) in y.iter_mut().zip(x).zip(weight) {
            *y = (x * inv_rms) * w;
        }
    }
}

/// [`rms_norm`] in place: each `weight.len()`-long row of `x` (e.g. one attention head, for
/// the per-head Q/K norms) normalized where it is.
pub fn rms_norm_in_place(isa: Isa, x: &mut [f32], weight: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(weight.len()) {
        let inv_rms = inv_rms(isa, row, eps);
        for (x, &w) in row.iter_mut().zip(weight) {
            *x = (*x * inv_rms) * w;
        }
    }
}
