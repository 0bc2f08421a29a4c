//! RMSNorm, row by row: `y = (x / sqrt(mean(x²) + eps)) * weight`, as Hugging Face's
//! LlamaRMSNorm computes it in f32 (the sum of squares is the canonical dot product).

use crate::simd::{dot, Isa};

/// Normalizes each `weight.len()`-long row of `x` into the same row of `out`.
pub fn rms_norm(isa: Isa, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let n = weight.len();
    for (x, y) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let mean_square = dot(isa, x, x) / n as f32;
        let inv_rms = 1.0 / (mean_square + eps).sqrt();
        for ((y, &x), &w) in y.iter_mut().zip(x).zip(weight) {
            *y = (x * inv_rms) * w;
        }
    }
}
