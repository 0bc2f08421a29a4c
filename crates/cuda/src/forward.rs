//! The llama/qwen2 step on the GPU: the activation workspace, and the sequence of kernel and
//! GEMM launches for one step, enqueued on the stream without waiting (so that the same
//! sequence can be captured into a graph).
//!
//! Per layer: add+RMSNorm -> QKV GEMM -> bias+RoPE+KV write -> attention (decode: split-K
//! flash-decoding; prefill chunks: flash attention over the paged prefix) -> O GEMM ->
//! add+RMSNorm -> gate/up GEMM -> SiLU*up -> down GEMM. The residual stream stays f32; GEMM
//! inputs are bf16, outputs f32.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::{ModelConfig, RopeStyle};

use crate::buffer::{DeviceBuffer, Layout};
use crate::gemm::Gemm;
use crate::kernels::{AttentionDims, DecodeArgs, Kernels, PrefillArgs};
use crate::kv_pool::KvPool;
use crate::sampling::SampleParams;
use crate::step_inputs::{Offsets, StepInputs};
use crate::weights::DeviceWeights;

/// Largest number of context splits of decode attention.
pub const MAX_SPLITS: usize = 32;

/// Sizes the workspace is laid out for.
#[derive(Debug, Clone, Copy)]
pub struct Capacity {
    /// Tokens in one step (max_num_batched_tokens, and at least the largest graph).
    pub tokens: usize,
    /// Sequences in one step.
    pub seqs: usize,
    /// LM-head rows computed at once (more are done in several passes).
    pub logit_rows: usize,
}

/// Context splits of decode attention for `num_decodes` sequences: enough blocks to fill the
/// GPU twice over, never more splits than 64-key pieces of the longest context (when known).
pub fn decode_splits(
    num_decodes: usize,
    kv_heads: usize,
    sm_count: usize,
    max_ctx: Option<usize>,
) -> usize {
    let blocks = (num_decodes * kv_heads).max(1);
    let mut splits = (2 * sm_count).div_ceil(blocks).clamp(1, MAX_SPLITS);
    if let Some(ctx) = max_ctx {
        splits = splits.min(ctx.div_ceil(64).max(1));
    }
    splits
}

/// Device addresses of the activation buffers.
pub struct Workspace {
    buf: DeviceBuffer,
    pub cap: Capacity,
    pub x: u64,
    pub delta: u64,
    pub xn: u64,
    pub qkv: u64,
    pub q: u64,
    pub attn: u64,
    pub gate_up: u64,
    pub act: u64,
    pub logits: u64,
    pub part_acc: u64,
    pub part_ml: u64,
    pub sample_rows: u64,
    pub sample_params: u64,
    pub sampled: u64,
    pub sample_partials: u64,
}

impl Workspace {
    pub fn new(
        stream: &Arc<CudaStream>,
        c: &ModelConfig,
        cap: Capacity,
        sm_count: usize,
    ) -> anyhow::Result<Workspace> {
        let (t, hidden, inter) = (cap.tokens, c.hidden_size, c.intermediate_size);
        let (q_dim, kv_dim) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        let most_partials = (1..=cap.seqs)
            .map(|d| d * decode_splits(d, c.num_kv_heads, sm_count, None))
            .max()
            .unwrap_or(1);
        let mut l = Layout::new();
        let x = l.take(t * hidden * 4);
        let delta = l.take(t * hidden * 4);
        let xn = l.take(t.max(cap.logit_rows) * hidden * 2);
        let qkv = l.take(t * (q_dim + 2 * kv_dim) * 4);
        let q = l.take(t * q_dim * 2);
        let attn = l.take(t * q_dim * 2);
        let gate_up = l.take(t * 2 * inter * 4);
        let act = l.take(t * inter * 2);
        let logits = l.take(cap.logit_rows * c.vocab_size * 4);
        let part_acc = l.take(most_partials * c.num_heads * c.head_dim * 4);
        let part_ml = l.take(most_partials * c.num_heads * 2 * 4);
        let sample_rows = l.take(cap.logit_rows * 4);
        let sample_params = l.take(cap.logit_rows * std::mem::size_of::<SampleParams>());
        let sampled = l.take(cap.logit_rows * 4);
        let sample_partials = l.take(Kernels::sample_partials_len(cap.logit_rows, c.vocab_size));
        let buf = DeviceBuffer::new(stream, l.bytes())?;
        Ok(Workspace {
            x: buf.at(x),
            delta: buf.at(delta),
            xn: buf.at(xn),
            qkv: buf.at(qkv),
            q: buf.at(q),
            attn: buf.at(attn),
            gate_up: buf.at(gate_up),
            act: buf.at(act),
            logits: buf.at(logits),
            part_acc: buf.at(part_acc),
            part_ml: buf.at(part_ml),
            sample_rows: buf.at(sample_rows),
            sample_params: buf.at(sample_params),
            sampled: buf.at(sampled),
            sample_partials: buf.at(sample_partials),
            cap,
            buf,
        })
    }

    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}

/// Launch shape of one step: everything `enqueue_layers` needs besides device addresses.
#[derive(Debug, Clone, Copy)]
pub struct StepShape {
    pub offsets: Offsets,
    pub num_tokens: usize,
    pub num_decodes: usize,
    pub decode_splits: usize,
    pub num_prefills: usize,
    pub max_q_len: usize,
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
        }
    }
}

/// What one step runs on.
pub struct Model<'a> {
    pub config: &'a ModelConfig,
    pub kernels: &'a Kernels,
    pub gemm: &'a Gemm,
    pub weights: &'a DeviceWeights,
    pub kv: &'a KvPool,
    pub ws: &'a Workspace,
    /// Device address of the packed step metadata (crate::step_inputs).
    pub meta: u64,
}

impl Model<'_> {
    fn meta(&self, offset: usize) -> u64 {
        self.meta + 4 * offset as u64
    }

    /// Every layer of the step; leaves the last layer's output in `x` + `delta`.
    pub fn enqueue_layers(&self, s: &StepShape) -> anyhow::Result<()> {
        let (c, k, ws, w) = (self.config, self.kernels, self.ws, self.weights);
        let n = s.num_tokens;
        let (hidden, inter) = (c.hidden_size, c.intermediate_size);
        let dims = AttentionDims {
            num_heads: c.num_heads,
            num_kv_heads: c.num_kv_heads,
            head_dim: c.head_dim,
        };
        let qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
        let o = s.offsets;
        k.embedding(w.embed, self.meta(o.tokens), ws.x, hidden, n)?;
        for (l, lw) in w.layers.iter().enumerate() {
            // The previous layer's down projection joins the residual here.
            let delta = if l == 0 { 0 } else { ws.delta };
            k.add_rmsnorm(
                ws.x,
                delta,
                lw.attn_norm,
                0,
                ws.xn,
                hidden,
                c.rms_norm_eps,
                n,
            )?;
            self.gemm
                .linear(k, ws.xn, lw.wqkv, ws.qkv, n, qkv_rows, hidden)?;
            k.rope_kv_write(
                ws.qkv,
                lw.bqkv,
                self.meta(o.positions),
                self.meta(o.slots),
                w.inv_freq,
                ws.q,
                self.kv.k(l),
                self.kv.v(l),
                dims,
                self.kv.page_size,
                c.rope_style == RopeStyle::Interleaved,
                n,
            )?;
            if s.num_decodes > 0 {
                k.attention_decode(&DecodeArgs {
                    dims,
                    q: ws.q,
                    k_cache: self.kv.k(l),
                    v_cache: self.kv.v(l),
                    pages: self.meta(o.pages),
                    page_offsets: self.meta(o.dec_page_off),
                    ctx_lens: self.meta(o.dec_ctx),
                    q_rows: self.meta(o.dec_q_rows),
                    out: ws.attn,
                    part_acc: ws.part_acc,
                    part_ml: ws.part_ml,
                    page_size: self.kv.page_size,
                    num_seqs: s.num_decodes,
                    num_splits: s.decode_splits,
                })?;
            }
            if s.num_prefills > 0 {
                k.attention_prefill(&PrefillArgs {
                    dims,
                    q: ws.q,
                    k_cache: self.kv.k(l),
                    v_cache: self.kv.v(l),
                    pages: self.meta(o.pages),
                    page_offsets: self.meta(o.pre_page_off),
                    q_starts: self.meta(o.pre_q_start),
                    q_lens: self.meta(o.pre_q_len),
                    pos0s: self.meta(o.pre_pos0),
                    out: ws.attn,
                    page_size: self.kv.page_size,
                    num_seqs: s.num_prefills,
                    max_q_len: s.max_q_len,
                })?;
            }
            self.gemm.linear(
                k,
                ws.attn,
                lw.wo,
                ws.delta,
                n,
                hidden,
                c.num_heads * c.head_dim,
            )?;
            k.add_rmsnorm(
                ws.x,
                ws.delta,
                lw.ffn_norm,
                0,
                ws.xn,
                hidden,
                c.rms_norm_eps,
                n,
            )?;
            self.gemm
                .linear(k, ws.xn, lw.w_gate_up, ws.gate_up, n, 2 * inter, hidden)?;
            k.silu_mul(ws.gate_up, ws.act, inter, n)?;
            self.gemm
                .linear(k, ws.act, lw.w_down, ws.delta, n, hidden, inter)?;
        }
        Ok(())
    }

    /// LM head for `rows` token rows listed at packed offset `rows_at`: the final residual add
    /// and norm of just those rows, then logits into the logits buffer (f32 [rows, vocab]).
    pub fn enqueue_logits(&self, rows_at: usize, rows: usize) -> anyhow::Result<()> {
        let (c, k, ws) = (self.config, self.kernels, self.ws);
        let delta = if c.num_layers == 0 { 0 } else { ws.delta };
        let w = self.weights;
        k.add_rmsnorm(
            ws.x,
            delta,
            w.output_norm,
            self.meta(rows_at),
            ws.xn,
            c.hidden_size,
            c.rms_norm_eps,
            rows,
        )?;
        self.gemm.linear(
            k,
            ws.xn,
            w.lm_head,
            ws.logits,
            rows,
            c.vocab_size,
            c.hidden_size,
        )
    }
}
