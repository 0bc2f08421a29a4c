//! `Model`: the one decoder forward pass over a batch of sequences and a paged KV cache, with
//! its per-step `Workspace`. Each layer runs as its spec in the layer plan says
//! (ferrite_model::plan, carried by `model_weights`): its mixer (attention with or without
//! bias, Q/K norm, window), its MLP (dense, or a mixture of experts: `moe`), its post norms.
//!
//! All tokens of the step are stacked into one `[tokens, hidden]` activation matrix, so each
//! matmul runs once per step; attention runs per (token, head). Every kernel is batch-invariant,
//! so a sequence's logits do not depend on its neighbours or on how its prompt was chunked.

use ferrite_engine::{
    validate_batch, BackendError, BatchLimits, ExpertLoad, ForwardOutput, LogitsRequest, SeqBatch,
};
use ferrite_model::config::ModelConfig;
use ferrite_model::plan::{AttentionSpec, ModelPlan, NormSpec};
use rayon::prelude::*;
use std::sync::Arc;

use crate::kernels::activation::gated;
use crate::kernels::attention::{attend_group, Window};
use crate::kernels::matmul::{matmul, matmul_group, MatmulJob};
use crate::kernels::norm::{rms_norm, rms_norm_in_place};
use crate::kernels::rope::Rope;
use crate::kv_cache::KvCache;
use crate::model_weights::{Mixer, Mlp, ModelWeights};
use crate::moe::{moe_mlp, MoeScratch};
use crate::simd::Isa;

/// Rows per parallel task for the element-wise kernels.
const ROWS_PER_TASK: usize = 8;

/// The forward pass over the weights (the role the CUDA backend's `Model` has too).
pub struct Model {
    config: ModelConfig,
    /// Every RMSNorm's epsilon and weight offset (the offset is folded into the weights).
    norm: NormSpec,
    /// Token embeddings are multiplied by this.
    embedding_scale: f32,
    /// Each layer's weights with the spec of its mixer and MLP (`ModelPlan::layers`).
    weights: ModelWeights,
    /// The distinct RoPE frequency sets (one, or gemma3's local and global) ...
    ropes: Vec<Rope>,
    /// ... and which one each layer uses.
    layer_rope: Vec<usize>,
    /// Token ids the LM head scores: the vocabulary, or its first ids (`limit_logits`).
    logits_vocab: usize,
    /// Per layer, per expert: tokens routed to it since load (no experts in a dense layer).
    expert_load: Arc<ExpertLoad>,
}

/// Per-step scratch: activation buffers reused from step to step (they only ever grow).
#[derive(Default)]
pub struct Workspace {
    /// (batch index, position) of every token of the step.
    tokens: Vec<(usize, usize)>,
    x: Vec<f32>,
    normed: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// Per rope of `Model::ropes`, a cos/sin table per token.
    cos_sin: Vec<f32>,
    logit_rows: Vec<usize>,
    moe: MoeScratch,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

impl Model {
    /// The forward pass of `plan` (made from `config`) over `weights` (built from `plan`).
    pub fn new(config: ModelConfig, plan: &ModelPlan, weights: ModelWeights) -> Self {
        let mut ropes: Vec<Rope> = Vec::new();
        let mut layer_rope = Vec::with_capacity(weights.layers.len());
        for layer in &weights.layers {
            let rope = match &layer.mixer {
                Mixer::Attention(a) => &a.spec.rope,
            };
            let index = match ropes.iter().position(|r| r.inv_freq() == rope.inv_freq) {
                Some(i) => i,
                None => {
                    ropes.push(Rope::new(rope.inv_freq.clone(), rope.style));
                    ropes.len() - 1
                }
            };
            layer_rope.push(index);
        }
        let expert_load =
            Arc::new(ExpertLoad::new(weights.layers.iter().map(
                |layer| match &layer.mlp {
                    Mlp::Moe { weights, .. } => weights.experts.len(),
                    Mlp::Dense { .. } => 0,
                },
            )));
        Model {
            logits_vocab: config.vocab_size,
            norm: plan.norm,
            embedding_scale: plan.embedding_scale,
            expert_load,
            config,
            weights,
            ropes,
            layer_rope,
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Tokens routed to each expert of each layer since load (no experts in a dense layer):
    /// whether the experts are balanced; shared with /metrics.
    pub fn expert_load_counters(&self) -> Arc<ExpertLoad> {
        Arc::clone(&self.expert_load)
    }

    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes()
    }

    /// Rejects a batch the forward pass cannot run, before anything is written.
    fn validate(&self, kv: &KvCache, batch: &[SeqBatch<'_>]) -> Result<(), BackendError> {
        let limits = BatchLimits {
            vocab_size: self.config.vocab_size,
            num_pages: kv.num_pages(),
            page_size: kv.page_size(),
            state_slots: 0,
        };
        validate_batch(batch, limits)
    }

    /// Switches every matrix with an integer kernel to the int8 path (`int8_gemm`); returns
    /// how many of how many matrices switched.
    pub fn use_int8_activations(&mut self) -> (usize, usize) {
        let matrices = self.weights.matrices_mut();
        let total = matrices.len();
        let switched = matrices
            .into_iter()
            .map(|m| usize::from(m.use_int8_activations()))
            .sum();
        (switched, total)
    }

    /// Scores only token ids `0..n` from now on (logits rows `n` wide): the LM head of a draft
    /// model is a large part of its step, and most proposals come from the common ids.
    pub fn limit_logits(&mut self, n: usize) {
        self.logits_vocab = n.clamp(1, self.config.vocab_size);
        self.weights.lm_head = self.weights.lm_head.first_rows(self.logits_vocab);
    }

    pub fn forward(
        &self,
        isa: Isa,
        kv: &mut KvCache,
        batch: &[SeqBatch<'_>],
        ws: &mut Workspace,
    ) -> Result<ForwardOutput, BackendError> {
        self.validate(kv, batch)?;
        let c = &self.config;
        let vocab = self.logits_vocab;
        // Every layer's heads have the config's size: one cos/sin table serves them all.
        let (hidden, hd) = (c.hidden_size, c.head_dim);

        ws.tokens.clear();
        ws.logit_rows.clear();
        for (b, seq) in batch.iter().enumerate() {
            let first = ws.tokens.len();
            ws.tokens
                .extend((0..seq.tokens.len()).map(|i| (b, seq.start_pos + i)));
            match seq.logits {
                LogitsRequest::None => {}
                LogitsRequest::Last => ws.logit_rows.push(ws.tokens.len() - 1),
                LogitsRequest::All => ws.logit_rows.extend(first..ws.tokens.len()),
            }
        }
        let n = ws.tokens.len();
        if n == 0 {
            return Ok(ForwardOutput {
                logits: Vec::new(),
                vocab_size: vocab,
            });
        }

        let x = sized(&mut ws.x, n * hidden);
        for ((b, pos), row) in ws.tokens.iter().zip(x.chunks_exact_mut(hidden)) {
            let token = batch[*b].tokens[pos - batch[*b].start_pos] as usize;
            self.weights.embed.dequantize_rows(token, 1, row);
            if self.embedding_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= self.embedding_scale);
            }
        }
        let cos_sin = sized(&mut ws.cos_sin, self.ropes.len() * n * hd);
        for (rope, tables) in self.ropes.iter().zip(cos_sin.chunks_exact_mut(n * hd)) {
            for ((_, pos), table) in ws.tokens.iter().zip(tables.chunks_exact_mut(hd)) {
                rope.table(*pos, table);
            }
        }

        let eps = self.norm.eps;
        for (layer_index, layer) in self.weights.layers.iter().enumerate() {
            let r = self.layer_rope[layer_index];
            let (rope, tables) = (&self.ropes[r], &cos_sin[r * n * hd..(r + 1) * n * hd]);
            let normed = sized(&mut ws.normed, n * hidden);
            rms_norm(isa, x, &layer.attn_norm, eps, normed);
            let proj = sized(&mut ws.proj, n * hidden);
            match &layer.mixer {
                Mixer::Attention(a) => {
                    let (q_dim, kv_dim) = (a.spec.q_dim(), a.spec.kv_dim());
                    let (q, k, v) = (
                        sized(&mut ws.q, n * q_dim),
                        sized(&mut ws.k, n * kv_dim),
                        sized(&mut ws.v, n * kv_dim),
                    );
                    matmul_group(
                        isa,
                        normed,
                        n,
                        &mut [
                            MatmulJob {
                                matrix: &a.wq,
                                out: q,
                            },
                            MatmulJob {
                                matrix: &a.wk,
                                out: k,
                            },
                            MatmulJob {
                                matrix: &a.wv,
                                out: v,
                            },
                        ],
                    );
                    if let Some([bq, bk, bv]) = &a.qkv_bias {
                        add_row_bias(q, bq);
                        add_row_bias(k, bk);
                        add_row_bias(v, bv);
                    }
                    if let Some([q_norm, k_norm]) = &a.qk_norm {
                        rms_norm_in_place(isa, q, q_norm, eps);
                        rms_norm_in_place(isa, k, k_norm, eps);
                    }
                    for (t, table) in tables.chunks_exact(hd).enumerate() {
                        rope.apply(&mut q[t * q_dim..(t + 1) * q_dim], table);
                        rope.apply(&mut k[t * kv_dim..(t + 1) * kv_dim], table);
                    }
                    for (t, &(b, pos)) in ws.tokens.iter().enumerate() {
                        let range = t * kv_dim..(t + 1) * kv_dim;
                        kv.write(
                            layer_index,
                            batch[b].block_table,
                            pos,
                            &k[range.clone()],
                            &v[range],
                        );
                    }
                    let attn = sized(&mut ws.attn, n * q_dim);
                    self.attention(isa, kv, layer_index, &a.spec, batch, &ws.tokens, q, attn);
                    matmul(isa, attn, n, &a.wo, proj);
                }
            }
            self.add_block_output(
                isa,
                x,
                proj,
                normed,
                layer.post_norms.as_ref().map(|p| &p[0]),
            );

            rms_norm(isa, x, &layer.ffn_norm, eps, normed);
            match &layer.mlp {
                Mlp::Moe {
                    activation,
                    weights,
                } => moe_mlp(
                    isa,
                    weights,
                    *activation,
                    normed,
                    n,
                    &mut ws.moe,
                    proj,
                    Some(self.expert_load.layer(layer_index)),
                ),
                Mlp::Dense {
                    activation,
                    gate: w_gate,
                    up: w_up,
                    down: w_down,
                } => {
                    let inter = w_gate.rows();
                    let (gate, up) = (sized(&mut ws.gate, n * inter), sized(&mut ws.up, n * inter));
                    matmul_group(
                        isa,
                        normed,
                        n,
                        &mut [
                            MatmulJob {
                                matrix: w_gate,
                                out: gate,
                            },
                            MatmulJob {
                                matrix: w_up,
                                out: up,
                            },
                        ],
                    );
                    gate.par_chunks_mut(ROWS_PER_TASK * inter)
                        .zip(up.par_chunks(ROWS_PER_TASK * inter))
                        .for_each(|(g, u)| gated(*activation, g, u));
                    matmul(isa, gate, n, w_down, proj);
                }
            }
            self.add_block_output(
                isa,
                x,
                proj,
                normed,
                layer.post_norms.as_ref().map(|p| &p[1]),
            );
        }

        let rows = ws.logit_rows.len();
        let normed = sized(&mut ws.normed, rows * hidden);
        for (dst, &t) in normed.chunks_exact_mut(hidden).zip(&ws.logit_rows) {
            rms_norm(
                isa,
                &x[t * hidden..(t + 1) * hidden],
                &self.weights.output_norm,
                eps,
                dst,
            );
        }
        let mut logits = vec![0.0; rows * vocab];
        matmul(isa, normed, rows, &self.weights.lm_head, &mut logits);
        Ok(ForwardOutput {
            logits,
            vocab_size: vocab,
        })
    }

    /// `x += out`, or `x += rms_norm(out)` with gemma3's post norms (`scratch` holds it).
    fn add_block_output(
        &self,
        isa: Isa,
        x: &mut [f32],
        out: &[f32],
        scratch: &mut [f32],
        post_norm: Option<&Vec<f32>>,
    ) {
        match post_norm {
            None => add_residual(x, out),
            Some(weight) => {
                rms_norm(isa, out, weight, self.norm.eps, scratch);
                add_residual(x, scratch);
            }
        }
    }

    /// Causal GQA attention for every (token, KV head) of the step, from the pages just
    /// written: the query heads sharing a KV head run together, reading its keys and values once.
    /// A sliding-window layer reads the last `window` positions only.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        isa: Isa,
        kv: &KvCache,
        layer: usize,
        spec: &AttentionSpec,
        batch: &[SeqBatch<'_>],
        tokens: &[(usize, usize)],
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
                let (b, pos) = tokens[t];
                let view = kv.head_view(layer, batch[b].block_table, kv_head);
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
                    scores,
                    group_out,
                );
            });
    }
}

fn add_row_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

fn add_residual(x: &mut [f32], delta: &[f32]) {
    for (v, d) in x.iter_mut().zip(delta) {
        *v += d;
    }
}
