//! Causal attention of query heads over keys and values read back from KV pages.
//!
//! For a query at position p: scores over positions 0..=p in order (canonical dot product,
//! times 1/sqrt(head_dim)), a softmax in f32, then the value rows added in position order.
//! Nothing depends on when a key was written or which other queries share the step.
//!
//! [`attend_group`] runs the query heads that share one KV head (grouped-query attention)
//! together, so each key and value row is read once for the group; per head it computes
//! exactly what [`attend`] computes.

use crate::simd::{axpy, dot, Isa};

/// Where the keys and values of one sequence's KV head live.
pub trait KvSource {
    fn key(&self, position: usize) -> &[f32];
    fn value(&self, position: usize) -> &[f32];
}

/// The keys and values of `source` from position `first` on, renumbered from 0: what a
/// sliding-window layer sees of a sequence (attend over it up to `last - first`).
pub struct Window<'a, S> {
    pub source: &'a S,
    pub first: usize,
}

impl<S: KvSource> KvSource for Window<'_, S> {
    fn key(&self, position: usize) -> &[f32] {
        self.source.key(self.first + position)
    }
    fn value(&self, position: usize) -> &[f32] {
        self.source.value(self.first + position)
    }
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
    attend_group(isa, q, 1, kv, last, scale, None, scores, out);
}

/// [`attend`] for `group` query heads at once: `q` and `out` hold `group` rows of the head
/// dimension, all attending over the same keys and values. `sinks` (gpt-oss), one logit per
/// head of the group, joins each head's softmax denominator as a key with no value would.
#[allow(clippy::too_many_arguments)]
pub fn attend_group(
    isa: Isa,
    q: &[f32],
    group: usize,
    kv: &impl KvSource,
    last: usize,
    scale: f32,
    sinks: Option<&[f32]>,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let hd = q.len() / group.max(1);
    let n = last + 1;
    scores.clear();
    scores.resize(group * n, 0.0);
    group_scores(isa, q, group, hd, kv, n, scale, scores);
    for (g, row) in scores.chunks_exact_mut(n).enumerate() {
        let sink = sinks.map(|s| s[g]);
        let max = row
            .iter()
            .copied()
            .fold(sink.unwrap_or(f32::NEG_INFINITY), f32::max);
        let mut sum = 0.0f32;
        for s in row.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        if let Some(sink) = sink {
            sum += (sink - max).exp();
        }
        // Kept as the weight the value rows get, e / sum, as `axpy` takes it.
        for s in row.iter_mut() {
            *s /= sum;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && matches!(hd, 64 | 128) {
        // SAFETY: AVX-512 was detected (the ISA is only chosen then); shapes as documented.
        unsafe {
            match hd {
                64 => x86::weighted_values::<4, 4>(scores, group, kv, n, out),
                _ => x86::weighted_values::<8, 2>(scores, group, kv, n, out),
            }
        }
        return;
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
        // SAFETY: AVX-512 was detected (the ISA is only chosen then); shapes as documented.
        unsafe {
            match hd {
                64 => x86::scores::<4, 4>(q, group, kv, n, scale, scores),
                _ => x86::scores::<8, 2>(q, group, kv, n, scale, scores),
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
    use super::KvSource;
    use crate::simd::vec16::{Avx512, Vec16};
    use std::arch::x86_64::*;

    /// `scores[g * n + p] = dot(q_g, key_p) * scale` for head size `16 * CH`, `QG` heads at a
    /// time held in registers. Sixteen positions at a time share one transposed reduction
    /// ([`reduce16`]) instead of sixteen horizontal ones.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub unsafe fn scores<const CH: usize, const QG: usize>(
        q: &[f32],
        group: usize,
        kv: &impl KvSource,
        n: usize,
        scale: f32,
        scores: &mut [f32],
    ) {
        let hd = 16 * CH;
        assert!(q.len() >= group * hd && scores.len() >= group * n);
        let scale_v = _mm512_set1_ps(scale);
        for g0 in (0..group).step_by(QG) {
            let heads = QG.min(group - g0);
            let mut qv = [[Avx512::zero(); CH]; QG];
            for (g, row) in qv.iter_mut().enumerate().take(heads) {
                for (c, v) in row.iter_mut().enumerate() {
                    *v = Avx512::load(q.as_ptr().add((g0 + g) * hd + 16 * c));
                }
            }
            let mut p = 0;
            while p + 16 <= n {
                let mut keys = [std::ptr::null::<f32>(); 16];
                for (i, key) in keys.iter_mut().enumerate() {
                    let row = kv.key(p + i);
                    assert!(row.len() >= hd);
                    *key = row.as_ptr();
                }
                for (g, qg) in qv.iter().enumerate().take(heads) {
                    let mut acc = [Avx512::zero(); 16];
                    for (a, &key) in acc.iter_mut().zip(&keys) {
                        for c in 0..CH {
                            *a = Avx512::fma(qg[c], Avx512::load(key.add(16 * c)), *a);
                        }
                    }
                    let dots = _mm512_mul_ps(reduce16(&acc), scale_v);
                    _mm512_storeu_ps(scores.as_mut_ptr().add((g0 + g) * n + p), dots);
                }
                p += 16;
            }
            for p in p..n {
                let key = kv.key(p);
                assert!(key.len() >= hd);
                let mut kr = [Avx512::zero(); CH];
                for (c, k) in kr.iter_mut().enumerate() {
                    *k = Avx512::load(key.as_ptr().add(16 * c));
                }
                for (g, qg) in qv.iter().enumerate().take(heads) {
                    let mut acc = Avx512::zero();
                    for c in 0..CH {
                        acc = Avx512::fma(qg[c], kr[c], acc);
                    }
                    scores[(g0 + g) * n + p] = Avx512::reduce(acc) * scale;
                }
            }
        }
    }

    /// Lane `i` of the result is `Vec16::reduce(acc[i])`: the same tree of additions
    /// (`l[j] + l[j+8]`, then `+4`, `+2`, `+1`), done for sixteen accumulators at once with
    /// shuffles, so every sum has the bits a horizontal reduction would give it.
    #[inline(always)]
    unsafe fn reduce16(acc: &[__m512; 16]) -> __m512 {
        // s8: the two 256-bit halves of each accumulator; t[i] = [s8(2i) | s8(2i+1)].
        let mut t = [_mm512_setzero_ps(); 8];
        for (i, t) in t.iter_mut().enumerate() {
            let (a, b) = (acc[2 * i], acc[2 * i + 1]);
            *t = _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x44>(a, b),
                _mm512_shuffle_f32x4::<0xEE>(a, b),
            );
        }
        // s4: 128-bit blocks 0+1 and 2+3 of each s8; w[i] block j = s4(4i + j).
        let mut w = [_mm512_setzero_ps(); 4];
        for (i, w) in w.iter_mut().enumerate() {
            let (a, b) = (t[2 * i], t[2 * i + 1]);
            *w = _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(a, b),
                _mm512_shuffle_f32x4::<0xDD>(a, b),
            );
        }
        // s2: lanes 0+2 and 1+3 within each block; x[k] block j = [s2(8k+j), s2(8k+4+j)].
        let x0 = _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(w[0], w[1]),
            _mm512_shuffle_ps::<0xEE>(w[0], w[1]),
        );
        let x1 = _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(w[2], w[3]),
            _mm512_shuffle_ps::<0xEE>(w[2], w[3]),
        );
        // s1: lanes 0+1 and 2+3; y block j = [sum(j), sum(4+j), sum(8+j), sum(12+j)].
        let y = _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(x0, x1),
            _mm512_shuffle_ps::<0xDD>(x0, x1),
        );
        // Back to accumulator order: sum(a) sits in lane 4 * (a % 4) + a / 4.
        let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_permutexvar_ps(order, y)
    }

    /// `out_g = sum_p weights[g * n + p] * value_p`, accumulated in position order with one
    /// fused multiply-add per element and step (what `axpy` does from a zeroed row), for
    /// head size `16 * CH`, `QG` heads' rows held in registers.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub unsafe fn weighted_values<const CH: usize, const QG: usize>(
        weights: &[f32],
        group: usize,
        kv: &impl KvSource,
        n: usize,
        out: &mut [f32],
    ) {
        let hd = 16 * CH;
        assert!(out.len() >= group * hd && weights.len() >= group * n);
        for g0 in (0..group).step_by(QG) {
            let heads = QG.min(group - g0);
            let mut acc = [[Avx512::zero(); CH]; QG];
            for p in 0..n {
                let value = kv.value(p);
                assert!(value.len() >= hd);
                let mut vr = [Avx512::zero(); CH];
                for (c, v) in vr.iter_mut().enumerate() {
                    *v = Avx512::load(value.as_ptr().add(16 * c));
                }
                for (g, row) in acc.iter_mut().enumerate().take(heads) {
                    let w = Avx512::splat(weights[(g0 + g) * n + p]);
                    for c in 0..CH {
                        row[c] = Avx512::fma(w, vr[c], row[c]);
                    }
                }
            }
            for (g, row) in acc.iter().enumerate().take(heads) {
                for (c, &v) in row.iter().enumerate() {
                    Avx512::store(out.as_mut_ptr().add((g0 + g) * hd + 16 * c), v);
                }
            }
        }
    }
}
