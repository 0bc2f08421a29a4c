//! Causal attention of query heads over keys and values read back from KV pages.
//!
//! For a query at position p: scores over positions 0..=p in order (canonical dot product,
//! times 1/sqrt(head_dim)), a softmax in f32, then the value rows added in position order.
//! Nothing depends on when a key was written or which other queries share the step.
//!
//! [`attend_group`] runs the query heads that share one KV head (grouped-query attention)
//! together, so each key and value row is read once for the group; per head it computes
//! exactly what [`attend`] computes.

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
    attend_group(isa, q, 1, kv, last, scale, scores, out);
}

/// [`attend`] for `group` query heads at once: `q` and `out` hold `group` rows of the head
/// dimension, all attending over the same keys and values.
#[allow(clippy::too_many_arguments)]
pub fn attend_group(
    isa: Isa,
    q: &[f32],
    group: usize,
    kv: &impl KvSource,
    last: usize,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let hd = q.len() / group.max(1);
    let n = last + 1;
    scores.clear();
    scores.resize(group * n, 0.0);
    group_scores(isa, q, group, hd, kv, n, scale, scores);
    for row in scores.chunks_exact_mut(n) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for s in row.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        // Kept as the weight the value rows get, e / sum, as `axpy` takes it.
        for s in row.iter_mut() {
            *s /= sum;
        }
    }
    out.fill(0.0);
    for p in 0..n {
        let v = kv.value(p);
        for (g, head_out) in out.chunks_exact_mut(hd).enumerate() {
            axpy(isa, scores[g * n + p], v, head_out);
        }
    }
}

/// `scores[g * n + p] = dot(q_g, key_p) * scale` with the canonical dot product.
#[allow(clippy::too_many_arguments)]
fn group_scores(
    isa: Isa,
    q: &[f32],
    group: usize,
    hd: usize,
    kv: &impl KvSource,
    n: usize,
    scale: f32,
    scores: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && matches!(hd, 64 | 128) {
        for p in 0..n {
            let key = kv.key(p);
            for g in 0..group {
                // SAFETY: AVX-512 was detected (the ISA is only chosen then); both rows hold
                // `hd` floats.
                let s = unsafe { x86::dot_avx512(&q[g * hd..(g + 1) * hd], key) };
                scores[g * n + p] = s * scale;
            }
        }
        return;
    }
    for p in 0..n {
        let key = kv.key(p);
        for g in 0..group {
            scores[g * n + p] = dot(isa, &q[g * hd..(g + 1) * hd], key) * scale;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::kernels::vec16::{Avx512, Vec16};

    /// The canonical dot product of two rows whose length is a multiple of 16 (checked).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
        let k = a.len().min(b.len());
        assert!(k % 16 == 0, "dot_avx512 needs whole 16-lane chunks");
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = Avx512::zero();
        let mut i = 0;
        while i < k {
            acc = Avx512::fma(Avx512::load(pa.add(i)), Avx512::load(pb.add(i)), acc);
            i += 16;
        }
        Avx512::reduce(acc)
    }
}
