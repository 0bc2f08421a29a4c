//! Causal attention of one query head over keys and values read back from KV pages.
//!
//! For a query at position p: scores over positions 0..=p in order (canonical dot product,
//! times 1/sqrt(head_dim)), a softmax in f32, then the value rows added in position order.
//! Nothing depends on when a key was written or which other queries share the step.

use super::simd::{axpy, dot, Isa};

/// Where the keys and values of one sequence's KV head live.
pub trait KvSource {
    fn key(&self, position: usize) -> &[f32];
    fn value(&self, position: usize) -> &[f32];
}

/// `out = softmax(q·Kᵀ · scale) · V` over positions `0..=last`; `scores` is scratch of at
/// least `last + 1` elements.
pub fn attend(
    isa: Isa,
    q: &[f32],
    kv: &impl KvSource,
    last: usize,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    scores.clear();
    let mut max = f32::NEG_INFINITY;
    for p in 0..=last {
        let s = dot(isa, q, kv.key(p)) * scale;
        max = max.max(s);
        scores.push(s);
    }
    let mut sum = 0.0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    out.fill(0.0);
    for (p, &e) in scores.iter().enumerate() {
        axpy(isa, e / sum, kv.value(p), out);
    }
}
