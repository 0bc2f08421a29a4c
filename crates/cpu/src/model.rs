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
use ferrite_model::plan::{ModelPlan, NormSpec};
use std::sync::Arc;

use crate::attention_layer::{AttentionScratch, StepTokens};
use crate::kernels::matmul::matmul;
use crate::kernels::norm::rms_norm;
use crate::kernels::quant_matrix::QuantMatrix;
use crate::kernels::rope::{self, Rope};
use crate::kv_cache::KvCache;
use crate::linear_attention::LinearScratch;
use crate::model_weights::{Mixer, Mlp, ModelWeights};
use crate::moe::{BesideScratch, MoeScratch};
use crate::per_layer_input::PerLayerScratch;
use crate::recurrent_state::StateCache;
use crate::simd::Isa;

mod layer;

/// Rows per parallel task for the element-wise kernels.
const ROWS_PER_TASK: usize = 8;

/// The forward pass over the weights (the role the CUDA backend's `Model` has too).
pub struct Model {
    config: ModelConfig,
    /// Every RMSNorm's epsilon and weight offset (the offset is folded into the weights).
    norm: NormSpec,
    /// Token embeddings are multiplied by this.
    embedding_scale: f32,
    /// Logits become `cap · tanh(logits / cap)` (Gemma 4).
    final_logit_softcap: Option<f32>,
    /// Each layer's weights with the spec of its mixer and MLP (`ModelPlan::layers`).
    weights: ModelWeights,
    /// The distinct RoPE frequency sets (one, or gemma3's local and global) ...
    ropes: Vec<Rope>,
    /// How many of `ropes` the decoder's layers use (the rest are draft heads' own, left out
    /// of the decoder's steps).
    decoder_ropes: usize,
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
    pub(crate) attention: AttentionScratch,
    linear: LinearScratch,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// Per rope of `Model::ropes`, a cos/sin table per token (`rope::table_layout`), and the
    /// tokens' positions they are for.
    pub(crate) cos_sin: Vec<f32>,
    positions: Vec<usize>,
    logit_rows: Vec<usize>,
    moe: MoeScratch,
    /// Gemma 4: the step's per-layer inputs, the experts beside the MLP.
    per_layer_inputs: Vec<f32>,
    per_layer: PerLayerScratch,
    beside: BesideScratch,
    /// What of the step's rows a draft head reads, kept in `hidden`.
    pub capture: HiddenCapture,
    pub hidden: Vec<f32>,
}

/// Hidden states a forward pass keeps for a draft head, a row per token of the step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HiddenCapture {
    #[default]
    Nothing,
    /// The final hidden state, after the final norm (an MTP layer's input).
    Final,
    /// The residual stream at the input of these three layers, side by side (an EAGLE-3
    /// head's `fc` input).
    LayerInputs([usize; 3]),
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
                // No RoPE: its entry is never read.
                Mixer::LinearAttention(_) => {
                    layer_rope.push(usize::MAX);
                    continue;
                }
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
        let expert_load = Arc::new(ExpertLoad::new(weights.layers.iter().map(|layer| {
            match &layer.mlp {
                Mlp::Moe { weights, .. } => weights.experts.len(),
                Mlp::Dense { .. } => layer
                    .experts_beside
                    .as_ref()
                    .map_or(0, |b| b.moe.experts.len()),
            }
        })));
        Model {
            logits_vocab: config.vocab_size,
            norm: plan.norm,
            embedding_scale: plan.embedding_scale,
            final_logit_softcap: plan.final_logit_softcap,
            expert_load,
            config,
            weights,
            decoder_ropes: ropes.len(),
            ropes,
            layer_rope,
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub(crate) fn norm_eps(&self) -> f32 {
        self.norm.eps
    }

    pub(crate) fn ropes(&self) -> &[Rope] {
        &self.ropes
    }

    /// The index in `ropes` of an attention layer's RoPE (`None`: a linear layer, or a RoPE
    /// none of the model's layers has).
    pub(crate) fn rope_of(&self, layer: &ferrite_model::plan::LayerSpec) -> Option<usize> {
        match &layer.mixer {
            ferrite_model::plan::Mixer::Attention(a) => {
                self.ropes.iter().position(|r| r.is(&a.rope))
            }
            ferrite_model::plan::Mixer::LinearAttention(_) => None,
        }
    }

    /// Makes `layer`'s RoPE one of the model's (a draft head's own), if none is already.
    pub(crate) fn add_rope_of(&mut self, layer: &ferrite_model::plan::LayerSpec) {
        if let ferrite_model::plan::Mixer::Attention(a) = &layer.mixer {
            if !self.ropes.iter().any(|r| r.is(&a.rope)) {
                self.ropes
                    .push(Rope::new(a.rope.inv_freq.clone(), a.rope.style));
            }
        }
    }

    pub(crate) fn embedding(&self) -> &QuantMatrix {
        &self.weights.embed
    }

    pub(crate) fn lm_head(&self) -> &QuantMatrix {
        &self.weights.lm_head
    }

    pub(crate) fn logits_vocab(&self) -> usize {
        self.logits_vocab
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
    fn validate(
        &self,
        kv: &KvCache,
        slots: usize,
        batch: &[SeqBatch<'_>],
    ) -> Result<(), BackendError> {
        let limits = BatchLimits {
            vocab_size: self.config.vocab_size,
            num_pages: kv.num_pages(),
            page_size: kv.page_size(),
            state_slots: slots,
            window_pages: kv.window_pages(),
        };
        validate_batch(batch, limits)
    }

    /// Switches every matrix with an integer kernel to the int8 path (`int8_gemm`); returns
    /// how many of how many matrices switched.
    pub fn use_int8_activations(&mut self) -> (usize, usize) {
        self.switch_matrices(QuantMatrix::use_int8_activations)
    }

    /// Switches every matrix the bf16 path takes (`bf16_gemm`: AMX tiles) to it; returns how
    /// many of how many matrices switched.
    pub fn use_bf16(&mut self) -> (usize, usize) {
        self.switch_matrices(QuantMatrix::use_bf16)
    }

    /// Applies `switch` (a matrix's path change, saying whether it took) to every matrix.
    fn switch_matrices(&mut self, switch: fn(&mut QuantMatrix) -> bool) -> (usize, usize) {
        let matrices = self.weights.matrices_mut();
        let total = matrices.len();
        let switched = matrices.into_iter().map(|m| usize::from(switch(m))).sum();
        (switched, total)
    }

    /// Scores only token ids `0..n` from now on (logits rows `n` wide): the LM head of a draft
    /// model is a large part of its step, and most proposals come from the common ids.
    pub fn limit_logits(&mut self, n: usize) {
        self.logits_vocab = n.clamp(1, self.config.vocab_size);
        self.weights.lm_head = self.weights.lm_head.first_rows(self.logits_vocab);
    }

    /// The step `batch` over the pages in `kv` and, for a hybrid, the recurrent `state`;
    /// `slots` is how many state slots the batch may name (the recurrent state's, or the
    /// seats of a draft head's rows on a model without one).
    pub fn forward(
        &self,
        isa: Isa,
        kv: &mut KvCache,
        mut state: Option<&mut StateCache>,
        slots: usize,
        batch: &[SeqBatch<'_>],
        ws: &mut Workspace,
    ) -> Result<ForwardOutput, BackendError> {
        self.validate(kv, slots, batch)?;
        if let Some(state) = state.as_deref_mut() {
            state.begin_step(batch)?;
        }
        let c = &self.config;
        let vocab = self.logits_vocab;
        let hidden = c.hidden_size;

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
        ws.positions.clear();
        ws.positions.extend(ws.tokens.iter().map(|&(_, pos)| pos));
        let ropes = &self.ropes[..self.decoder_ropes];
        let layout = rope::table_layout(ropes, n);
        let cos_sin = sized(&mut ws.cos_sin, layout.iter().map(|(_, w)| n * w).sum());
        rope::fill_tables(ropes, &layout, &ws.positions, cos_sin);
        if let Some(tables) = &self.weights.per_layer {
            let ids = ws
                .tokens
                .iter()
                .map(|&(b, pos)| batch[b].tokens[pos - batch[b].start_pos]);
            let inputs = sized(&mut ws.per_layer_inputs, n * tables.len());
            tables
                .compute(isa, ids, x, self.norm.eps, &mut ws.per_layer, inputs)
                .map_err(|e| BackendError(e.to_string()))?;
        }

        // The layers work on `ws.x` taken out of the workspace (they borrow the rest of it).
        let mut x = std::mem::take(&mut ws.x);
        let tokens = std::mem::take(&mut ws.tokens);
        let step = StepTokens {
            batch,
            tokens: &tokens,
        };
        let mut result = Ok(());
        if let HiddenCapture::LayerInputs(_) = ws.capture {
            sized(&mut ws.hidden, n * 3 * hidden);
        }
        for (layer_index, layer) in self.weights.layers.iter().enumerate() {
            if let HiddenCapture::LayerInputs(layers) = ws.capture {
                for j in (0..3).filter(|&j| layers[j] == layer_index) {
                    let rows = ws.hidden.chunks_exact_mut(3 * hidden);
                    for (dst, src) in rows.zip(x[..n * hidden].chunks_exact(hidden)) {
                        dst[j * hidden..(j + 1) * hidden].copy_from_slice(src);
                    }
                }
            }
            let rope = self.layer_rope[layer_index];
            result = self.run_layer(
                isa,
                (layer_index, layer, rope),
                &mut x[..n * hidden],
                kv,
                state.as_deref_mut(),
                &step,
                &layout,
                None,
                ws,
            );
            if result.is_err() {
                break;
            }
        }
        ws.tokens = tokens;
        ws.x = x;
        result?;
        let x = &ws.x[..n * hidden];
        let eps = self.norm.eps;
        if ws.capture == HiddenCapture::Final {
            // Every row's final hidden state (after the final norm), for a drafting head.
            let hidden_rows = sized(&mut ws.hidden, n * hidden);
            for (dst, src) in hidden_rows
                .chunks_exact_mut(hidden)
                .zip(x.chunks_exact(hidden))
            {
                rms_norm(isa, src, &self.weights.output_norm, eps, dst);
            }
        }

        if let Some(state) = state.as_deref_mut() {
            state.end_step(batch)?;
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
        if let Some(cap) = self.final_logit_softcap {
            // transformers: (logits / cap).tanh() * cap, in f32.
            logits.iter_mut().for_each(|l| *l = (*l / cap).tanh() * cap);
        }
        Ok(ForwardOutput {
            logits,
            vocab_size: vocab,
        })
    }
}

fn add_residual(x: &mut [f32], delta: &[f32]) {
    for (v, d) in x.iter_mut().zip(delta) {
        *v += d;
    }
}
