//! The softmax-attention mixer of one layer over a step's tokens: Q, K, V (biases, per-head
//! Q/K norms, Gemma 4's weightless V norm and keys as values, RoPE), K and V written into the
//! sequences' pages, causal GQA attention over the pages (another layer's, for Gemma 4's
//! KV-sharing layers, which compute no K/V), the output gate of gated attention (qwen3_next,
//! qwen3_5), the output projection.

use ferrite_engine::SeqBatch;
use ferrite_model::plan::AttentionSpec;
use rayon::prelude::*;

use crate::kernels::attention::{attend_group, Window};
use crate::kernels::matmul::{matmul, matmul_group, MatmulJob};
use crate::kernels::norm::rms_norm_in_place;
use crate::kernels::rope::Rope;
use crate::kv_cache::KvCache;
use crate::model_weights::Attention;
use crate::simd::Isa;

/// Scratch of the attention layers, reused from step to step.
#[derive(Default)]
pub struct AttentionScratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    gate: Vec<f32>,
    attn: Vec<f32>,
    /// A weight of ones for the weightless V norm.
    ones: Vec<f32>,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// The step's tokens: `(batch index, position)` of each, in the order of the stacked rows.
pub struct StepTokens<'a, 'b> {
    pub batch: &'a [SeqBatch<'b>],
    pub tokens: &'a [(usize, usize)],
}

/// This layer's RoPE and the cos/sin table of each token (`width` apart).
pub struct RopeTables<'a> {
    pub rope: &'a Rope,
    pub tables: &'a [f32],
    pub width: usize,
}

/// One attention layer: `normed` is `[n, hidden]`, `out` gets `[n, hidden]`.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    isa: Isa,
    a: &Attention,
    layer: usize,
    kv: &mut KvCache,
    step: &StepTokens<'_, '_>,
    rope: &RopeTables<'_>,
    normed: &[f32],
    n: usize,
    eps: f32,
    scratch: &mut AttentionScratch,
    out: &mut [f32],
) {
    let (q_dim, hd) = (a.spec.q_dim(), a.spec.head_dim);
    let q = sized(&mut scratch.q, n * q_dim);
    let gate_len = if a.gate.is_some() { n * q_dim } else { 0 };
    let gate = sized(&mut scratch.gate, gate_len);
    let mut jobs = vec![MatmulJob {
        matrix: &a.wq,
        out: &mut *q,
    }];
    if let Some(wg) = &a.gate {
        jobs.push(MatmulJob {
            matrix: wg,
            out: &mut *gate,
        });
    }
    matmul_group(isa, normed, n, &mut jobs);
    drop(jobs);
    if let Some([bq, _, _]) = &a.qkv_bias {
        add_row_bias(q, bq);
    }
    if let Some(q_norm) = &a.q_norm {
        rms_norm_in_place(isa, q, q_norm, eps);
    }
    for (t, table) in rope.tables.chunks_exact(rope.width).take(n).enumerate() {
        rope.rope
            .apply(&mut q[t * q_dim..(t + 1) * q_dim], hd, table);
    }
    let kv_layer = match a.spec.kv_source {
        Some(source) => source,
        None => {
            write_kv(isa, a, layer, kv, step, rope, normed, n, eps, scratch);
            layer
        }
    };
    let (q, gate) = (&scratch.q[..n * q_dim], &scratch.gate[..gate_len]);
    let attn = sized(&mut scratch.attn, n * q_dim);
    attend(
        isa,
        kv,
        kv_layer,
        &a.spec,
        a.sinks.as_deref(),
        step,
        q,
        attn,
    );
    if a.gate.is_some() {
        for (o, &g) in attn.iter_mut().zip(gate.iter()) {
            *o *= 1.0 / (1.0 + (-g).exp());
        }
    }
    matmul(isa, attn, n, &a.wo, out);
    if let Some(bias) = &a.wo_bias {
        add_row_bias(&mut out[..n * bias.len()], bias);
    }
}

/// The K and V of the step's tokens in layer `layer` (projections, biases, norms, RoPE on K)
/// written to their pages: an attention layer's part that later queries read (all a drafting
/// layer's catch-up needs).
#[allow(clippy::too_many_arguments)]
pub fn write_kv(
    isa: Isa,
    a: &Attention,
    layer: usize,
    kv: &mut KvCache,
    step: &StepTokens<'_, '_>,
    rope: &RopeTables<'_>,
    normed: &[f32],
    n: usize,
    eps: f32,
    scratch: &mut AttentionScratch,
) {
    let (kv_dim, hd) = (a.spec.kv_dim(), a.spec.head_dim);
    let (k, v) = (
        sized(&mut scratch.k, n * kv_dim),
        sized(&mut scratch.v, n * kv_dim),
    );
    let mut jobs = Vec::with_capacity(2);
    if let Some(wk) = &a.wk {
        jobs.push(MatmulJob {
            matrix: wk,
            out: &mut *k,
        });
    }
    if let Some(wv) = &a.wv {
        jobs.push(MatmulJob {
            matrix: wv,
            out: &mut *v,
        });
    }
    matmul_group(isa, normed, n, &mut jobs);
    drop(jobs);
    if a.spec.values_are_keys {
        // Gemma 4's attention_k_eq_v: V is the K projection, before K's norm and RoPE.
        v.copy_from_slice(k);
    }
    if let Some([_, bk, bv]) = &a.qkv_bias {
        add_row_bias(k, bk);
        add_row_bias(v, bv);
    }
    if let Some(k_norm) = &a.k_norm {
        rms_norm_in_place(isa, k, k_norm, eps);
    }
    if a.spec.v_norm {
        let ones = sized(&mut scratch.ones, hd);
        ones.fill(1.0);
        rms_norm_in_place(isa, v, ones, eps);
    }
    for (t, table) in rope.tables.chunks_exact(rope.width).take(n).enumerate() {
        rope.rope
            .apply(&mut k[t * kv_dim..(t + 1) * kv_dim], hd, table);
    }
    for (t, &(b, pos)) in step.tokens.iter().enumerate() {
        let range = t * kv_dim..(t + 1) * kv_dim;
        kv.write(layer, &step.batch[b], pos, &k[range.clone()], &v[range]);
    }
}

/// Causal GQA attention for every (token, KV head) of the step, from the pages of layer
/// `layer` (just written: this layer's, or the earlier layer's it shares): the query heads sharing a KV head run together, reading its keys and values once.
/// A sliding-window layer reads the last `window` positions only. `sinks`: one logit per
/// query head (gpt-oss).
#[allow(clippy::too_many_arguments)]
fn attend(
    isa: Isa,
    kv: &KvCache,
    layer: usize,
    spec: &AttentionSpec,
    sinks: Option<&[f32]>,
    step: &StepTokens<'_, '_>,
    q: &[f32],
    out: &mut [f32],
) {
    let (hd, kv_heads, group) = (spec.head_dim, spec.num_kv_heads, spec.group());
    let (scale, window) = (spec.scale, spec.window);
    let width = group * hd;
    out.par_chunks_mut(width)
        .enumerate()
        .for_each_init(Vec::new, |scores, (i, group_out)| {
            let (t, kv_head) = (i / kv_heads, i % kv_heads);
            let (b, pos) = step.tokens[t];
            let view = kv.head_view(layer, &step.batch[b], kv_head);
            let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let view = Window {
                source: &view,
                first,
            };
            attend_group(
                isa,
                &q[i * width..(i + 1) * width],
                group,
                &view,
                pos - first,
                scale,
                sinks.map(|s| &s[kv_head * group..(kv_head + 1) * group]),
                scores,
                group_out,
            );
        });
}

fn add_row_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}
