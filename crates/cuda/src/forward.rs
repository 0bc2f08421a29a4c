//! The decoder step on the GPU, for every architecture the config describes: the sequence of
//! kernel and GEMM launches for one step, enqueued on the stream without waiting (so that the
//! same sequence can be captured into a graph).
//!
//! Embedding (times the embedding scale), then per layer: add+RMSNorm -> QKV GEMM ->
//! [per-head Q/K RMSNorm] -> bias+RoPE (this layer's frequencies)+KV write -> attention
//! (decode: split-K flash-decoding; prefill chunks: flash attention over the paged prefix;
//! this layer's window, the config's score scale) -> O GEMM -> [post-attention RMSNorm] ->
//! add+RMSNorm -> gate/up GEMM -> SiLU or GELU-tanh * up -> down GEMM (or, in a sparse layer
//! of a mixture of experts, crate::moe_mlp) -> [post-MLP RMSNorm].
//! Bracketed steps run when the layer's spec (ferrite_model::plan) asks for them (qwen3,
//! gemma3). The residual stream
//! stays f32; GEMM inputs are bf16, outputs f32 (the QKV and gate/up rows of a prompt chunk
//! bf16, and its O and down projections added to the residual by cuBLAS itself).

use ferrite_model::config::{ModelConfig, RopeStyle};

use crate::device_ptr::DevicePtr;
use crate::expert_load::DeviceExpertLoad;
use crate::gemm::Gemm;
use crate::kv_cache::KvCache;
use crate::launchers::{
    AddRmsNormArgs, AttentionDims, AttentionMask, DecodeArgs, Kernels, Lookup, PrefillArgs,
    RmsNormRowsArgs, RopeKvArgs,
};
use crate::linear::Linear;
use crate::step_inputs::{Offsets, StepInputs};
mod capture;
mod eagle3;
mod head_rows;
mod linear_attention;
mod mtp;

pub use capture::Capture;
pub use head_rows::HeadRows;

use crate::weights::{AttentionWeights, LayerWeights, Mixer, Mlp, ModelWeights};
use crate::workspace::Workspace;

/// Launch shape of one step: everything `enqueue_layers` needs besides device addresses.
#[derive(Debug, Clone, Copy)]
pub struct StepShape {
    pub offsets: Offsets,
    pub num_tokens: usize,
    pub num_decodes: usize,
    pub decode_splits: usize,
    pub num_prefills: usize,
    pub max_q_len: usize,
    /// Sequences, padding included.
    pub num_seqs: usize,
}

impl StepShape {
    pub fn of(inputs: &StepInputs, decode_splits: usize) -> StepShape {
        StepShape {
            offsets: inputs.offsets,
            num_tokens: inputs.num_tokens,
            num_decodes: inputs.num_decodes,
            decode_splits,
            num_prefills: inputs.num_prefills,
            max_q_len: inputs.max_q_len,
            num_seqs: inputs.num_seqs,
        }
    }
}

/// The forward pass: what one step runs on (the CPU backend's counterpart has the same name).
pub struct Model<'a> {
    pub config: &'a ModelConfig,
    pub kernels: &'a Kernels,
    pub gemm: &'a Gemm,
    pub weights: &'a ModelWeights,
    pub kv: &'a KvCache,
    pub ws: &'a Workspace,
    /// Device address of the packed step metadata (crate::step_inputs).
    pub meta: DevicePtr,
    /// The expert-load counters of a mixture of experts.
    pub expert_load: Option<&'a DeviceExpertLoad>,
    /// Every slot's recurrent state (f32, `weights.state_len` a slot) for linear-attention
    /// layers.
    pub state: Option<DevicePtr>,
    /// Records the input projections of the step's rewindable sequences at each
    /// linear-attention layer (crate::state_rewind).
    pub recording: Option<&'a dyn InputRecorder>,
    /// Keeps the inputs of the layers an EAGLE-3 head reads.
    pub capture: Option<Capture>,
}

/// Keeps what a linear-attention layer's step computed from its inputs, before the layer
/// runs them (`mixed`: the step's input projections).
pub trait InputRecorder {
    fn record(&self, state_offset: usize, mixed: DevicePtr) -> anyhow::Result<()>;
}

impl Model<'_> {
    /// The address of the packed metadata array at `offset` (in i32 elements).
    fn meta(&self, offset: usize) -> DevicePtr {
        self.meta.offset(4 * offset)
    }

    /// y = x W^T for the step's `n` token rows (f32 out).
    fn linear(&self, n: usize, x: DevicePtr, w: &Linear, y: DevicePtr) -> anyhow::Result<()> {
        self.gemm.linear(self.kernels, x, w, y, n, self.ws.dequant)
    }

    /// y = input W^T as bf16 rows where cuBLAS writes them (prompt chunks) and the reader
    /// takes them (`bf16_ok`), else f32; returns whether they are bf16.
    fn rows_maybe_bf16(
        &self,
        n: usize,
        input: DevicePtr,
        w: &Linear,
        y: DevicePtr,
        bf16_ok: bool,
    ) -> anyhow::Result<bool> {
        if bf16_ok && self.gemm.linear_bf16(input, w, y, n)? {
            return Ok(true);
        }
        self.linear(n, input, w, y)?;
        Ok(false)
    }

    /// Projects `input` through `w` into the residual stream: added to `x` by cuBLAS, or
    /// written to `delta` (returns whether it is pending there). A projection cuBLAS runs adds
    /// itself in its epilogue, unless a post-norm must first scale it.
    fn add_projection(
        &self,
        n: usize,
        input: DevicePtr,
        w: &Linear,
        post_norm: bool,
    ) -> anyhow::Result<bool> {
        if !post_norm && self.gemm.linear_add(input, w, self.ws.x, n)? {
            return Ok(false);
        }
        self.linear(n, input, w, self.ws.delta)?;
        Ok(true)
    }

    /// The residual add (`delta`, `bias` when given) and RMSNorm of the step's `n` rows of `x`
    /// into `xn`.
    fn add_norm(
        &self,
        n: usize,
        delta: Option<DevicePtr>,
        bias: Option<DevicePtr>,
        weight: DevicePtr,
    ) -> anyhow::Result<()> {
        let ws = self.ws;
        self.kernels.add_rmsnorm(&AddRmsNormArgs {
            x: ws.x,
            delta,
            bias,
            weight,
            rows: None,
            out: ws.xn,
            hidden: self.config.hidden_size,
            eps: self.weights.norm.eps,
            n,
        })
    }

    /// In place on f32 rows: `heads` rows of `dim` per token, `stride` floats apart.
    fn norm_rows(
        &self,
        n: usize,
        x: DevicePtr,
        weight: DevicePtr,
        heads: usize,
        stride: usize,
        dim: usize,
    ) -> anyhow::Result<()> {
        self.kernels.rmsnorm_rows(&RmsNormRowsArgs {
            x,
            weight,
            heads,
            token_stride: stride,
            dim,
            eps: self.weights.norm.eps,
            n,
        })
    }

    /// Every layer of the step; leaves the last layer's output in `x`, plus `delta` when the
    /// returned `delta_pending` is true (pass it to [`Model::enqueue_logits`]).
    pub fn enqueue_layers(&self, s: &StepShape) -> anyhow::Result<bool> {
        let (c, k, ws, w) = (self.config, self.kernels, self.ws, self.weights);
        let lookup = Lookup {
            tokens: self.meta(s.offsets.tokens),
            x: ws.x,
            hidden: c.hidden_size,
            scale: w.embedding_scale,
            n: s.num_tokens,
        };
        k.embed_tokens(&w.embed, &lookup)?;
        let mut delta_pending = false;
        for (l, lw) in w.layers.iter().enumerate() {
            delta_pending = self.enqueue_layer(s, l, lw, delta_pending)?;
        }
        Ok(delta_pending)
    }

    /// Decoder layer `lw` (KV-cache layer `l`) over the residual stream `x`, whose last
    /// projection is still in `delta` when `delta_pending`; returns the same of its own.
    pub fn enqueue_layer(
        &self,
        s: &StepShape,
        l: usize,
        lw: &LayerWeights,
        delta_pending: bool,
    ) -> anyhow::Result<bool> {
        let (ws, n, hidden) = (self.ws, s.num_tokens, self.config.hidden_size);
        // The previous layer's down projection joins the residual here if still pending.
        self.add_norm(n, delta_pending.then_some(ws.delta), None, lw.attn_norm)?;
        // x is now the layer's input, what an EAGLE-3 head may read of it.
        if let Some(c) = &self.capture {
            c.layer_input(self.kernels, l, ws.x, hidden, n)?;
        }
        self.enqueue_layer_from(s, l, lw, None)
    }

    /// Layer `lw` from its mixer on, the residual stream in `x`: the mixer reads the normed
    /// rows `xn`, or `mixer_input` (bf16 rows of the attention's input width: an EAGLE-3
    /// head's). Returns whether its last projection is pending in `delta`.
    pub fn enqueue_layer_from(
        &self,
        s: &StepShape,
        l: usize,
        lw: &LayerWeights,
        mixer_input: Option<DevicePtr>,
    ) -> anyhow::Result<bool> {
        let (ws, n, hidden) = (self.ws, s.num_tokens, self.config.hidden_size);
        let post_norm = lw.post_norms.is_some();
        // The output projection's bias joins the residual with the next norm (no post-norm
        // has one: launchers::supports).
        let mut output_bias = None;
        let mut delta_pending = match &lw.mixer {
            Mixer::Attention(a) => {
                self.enqueue_attention(s, l, a, mixer_input.unwrap_or(ws.xn), false)?;
                output_bias = a.bo;
                self.add_projection(n, ws.attn, &a.wo, post_norm)?
            }
            Mixer::LinearAttention(g) => {
                anyhow::ensure!(
                    mixer_input.is_none(),
                    "a linear-attention layer reads its normed rows only"
                );
                let out = self.enqueue_linear_attention(s, g)?;
                self.add_projection(n, out, &g.w_out, post_norm)?
            }
        };
        if let Some(post) = lw.post_norms {
            self.norm_rows(n, ws.delta, post.attention, 1, hidden, hidden)?;
        }
        let delta = delta_pending.then_some(ws.delta);
        self.add_norm(n, delta, output_bias, lw.ffn_norm)?;
        match &lw.mlp {
            Mlp::Dense {
                activation,
                gate_up,
                down,
            } => {
                let bf16 = self.rows_maybe_bf16(n, ws.xn, gate_up, ws.gate_up, true)?;
                let inter = gate_up.rows / 2;
                self.kernels
                    .gated_activation(*activation, ws.gate_up, bf16, ws.act, inter, n)?;
                delta_pending = self.add_projection(n, ws.act, down, post_norm)?;
            }
            Mlp::Sparse(moe) => {
                self.enqueue_moe(moe, n, l, self.meta(s.offsets.slots))?;
                delta_pending = true;
            }
        }
        if let Some(post) = lw.post_norms {
            self.norm_rows(n, ws.delta, post.mlp, 1, hidden, hidden)?;
        }
        Ok(delta_pending)
    }

    /// Softmax attention of layer `l` from the bf16 rows `input` (the normed rows `ws.xn`
    /// but in a draft head) into `ws.attn`: QKV GEMM, [per-head Q/K RMSNorm], bias + RoPE + KV
    /// write, then decode and prefill attention (none with `kv_only`: the step's K and V are
    /// written, nothing reads them yet).
    pub(crate) fn enqueue_attention(
        &self,
        s: &StepShape,
        l: usize,
        a: &AttentionWeights,
        input: DevicePtr,
        kv_only: bool,
    ) -> anyhow::Result<()> {
        let (k, ws, spec) = (self.kernels, self.ws, &a.spec);
        let (n, o, page_size) = (s.num_tokens, s.offsets, self.kv.page_size);
        let (k_cache, v_cache) = (self.kv.k(l), self.kv.v(l));
        // A sliding-window layer with a pool of its own writes and reads through the window
        // tables (the same offsets as the others' without one).
        let (slots, dec_pages, pre_pages) = match self.kv.is_windowed(l) {
            true => (o.wslots, o.dec_wpage_off, o.pre_wpage_off),
            false => (o.slots, o.dec_page_off, o.pre_page_off),
        };
        let dims = AttentionDims {
            num_heads: spec.num_heads,
            num_kv_heads: spec.num_kv_heads,
            head_dim: spec.head_dim,
        };
        let mask = AttentionMask {
            scale: spec.scale,
            window: spec.window.unwrap_or(0),
            sinks: a.sinks,
        };
        // The per-head Q/K norms and the output gate read f32 rows.
        let f32_rows = a.qk_norm.is_some() || spec.output_gate;
        let qkv_bf16 = self.rows_maybe_bf16(n, input, &a.wqkv, ws.qkv, !f32_rows)?;
        // Q, K, V (then the output gate) of each token.
        let qkv_rows = a.wqkv.rows;
        if let Some(qk) = a.qk_norm {
            // Q heads, then K heads, of each token's QKV row (no bias: launchers::supports).
            let k_part = ws.qkv.offset(4 * spec.q_dim());
            self.norm_rows(n, ws.qkv, qk.q, spec.num_heads, qkv_rows, spec.head_dim)?;
            self.norm_rows(n, k_part, qk.k, spec.num_kv_heads, qkv_rows, spec.head_dim)?;
        }
        k.rope_kv_write(&RopeKvArgs {
            dims,
            qkv: ws.qkv,
            row_stride: qkv_rows,
            rotary_dim: 2 * spec.rope.inv_freq.len(),
            qkv_bf16,
            bias: a.bqkv,
            positions: self.meta(o.positions),
            slots: self.meta(slots),
            inv_freq: a.inv_freq,
            q_out: ws.q,
            k_cache,
            v_cache,
            page_size,
            interleaved: spec.rope.style == RopeStyle::Interleaved,
            n,
        })?;
        if kv_only {
            return Ok(());
        }
        if s.num_decodes > 0 {
            k.attention_decode(&DecodeArgs {
                dims,
                mask,
                q: ws.q,
                k_cache,
                v_cache,
                pages: self.meta(o.pages),
                page_offsets: self.meta(dec_pages),
                ctx_lens: self.meta(o.dec_ctx),
                q_rows: self.meta(o.dec_q_rows),
                out: ws.attn,
                part_acc: ws.part_acc,
                part_ml: ws.part_ml,
                seq_splits: ws.seq_splits,
                page_size,
                num_seqs: s.num_decodes,
                num_splits: s.decode_splits,
            })?;
        }
        if s.num_prefills > 0 {
            k.attention_prefill(&PrefillArgs {
                dims,
                mask,
                q: ws.q,
                k_cache,
                v_cache,
                pages: self.meta(o.pages),
                page_offsets: self.meta(pre_pages),
                q_starts: self.meta(o.pre_q_start),
                q_lens: self.meta(o.pre_q_len),
                pos0s: self.meta(o.pre_pos0),
                out: ws.attn,
                page_size,
                num_seqs: s.num_prefills,
                max_q_len: s.max_q_len,
            })?;
        }
        if spec.output_gate {
            let gate = ws.qkv.offset(4 * (spec.q_dim() + 2 * spec.kv_dim()));
            k.sigmoid_gate_mul(ws.attn, gate, qkv_rows, spec.q_dim(), n)?;
        }
        Ok(())
    }

    /// LM head for `rows` token rows listed at packed offset `rows_at`: the final residual add
    /// and norm of just those rows, then logits into the logits buffer (f32 [rows, vocab]).
    /// `delta_pending`: what [`Model::enqueue_layers`] returned.
    pub fn enqueue_logits(
        &self,
        rows_at: usize,
        rows: usize,
        delta_pending: bool,
    ) -> anyhow::Result<()> {
        let (c, k, ws, w) = (self.config, self.kernels, self.ws, self.weights);
        k.add_rmsnorm(&AddRmsNormArgs {
            x: ws.x,
            // The last layer's down projection joins the residual here if still pending.
            delta: delta_pending.then_some(ws.delta),
            bias: None,
            weight: w.output_norm,
            rows: Some(self.meta(rows_at)),
            out: ws.xn,
            hidden: c.hidden_size,
            eps: w.norm.eps,
            n: rows,
        })?;
        self.gemm
            .linear(k, ws.xn, &w.lm_head, ws.logits, rows, ws.dequant)
    }
}
