//! The activation workspace: every buffer a step writes besides the KV cache, laid out once in
//! one allocation for the largest step, so that captured graphs keep pointing at the same
//! memory.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::ModelConfig;

use crate::buffer::{DeviceBuffer, Layout, Scratch};
use crate::device_ptr::DevicePtr;
use crate::launchers::{
    decode_splits, moe_max_items, Kernels, MoeRouting, SampleParams, GDN_CHUNK_ROW, MOE_CHUNKS,
};

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

/// Device addresses of the activation buffers.
pub struct Workspace {
    buf: DeviceBuffer,
    pub cap: Capacity,
    /// f32 [tokens, hidden]: the residual stream.
    pub x: DevicePtr,
    /// f32 [tokens, hidden]: a layer's output before it joins the residual.
    pub delta: DevicePtr,
    /// bf16 [tokens (or LM-head rows), hidden]: normalised activations.
    pub xn: DevicePtr,
    pub qkv: DevicePtr,
    pub q: DevicePtr,
    pub attn: DevicePtr,
    pub gate_up: DevicePtr,
    pub act: DevicePtr,
    /// f32 [logit_rows, vocab].
    pub logits: DevicePtr,
    /// Split-K partial results of decode attention.
    pub part_acc: DevicePtr,
    pub part_ml: DevicePtr,
    /// i32 [seqs]: how many splits each sequence's decode attention used.
    pub seq_splits: DevicePtr,
    pub sample_rows: DevicePtr,
    pub sample_params: DevicePtr,
    pub sampled: DevicePtr,
    pub sample_partials: DevicePtr,
    /// i32 [logit rows] and u32 [logit rows, ceil(vocab / 32)]: constrained rows' token masks.
    pub mask_rows: DevicePtr,
    pub mask_words: DevicePtr,
    /// bf16 rows of a quantized matrix dequantized for cuBLAS (crate::gemm).
    pub dequant: Scratch,
    /// A mixture of experts' buffers (`None` for a dense model).
    pub moe: Option<MoeBuffers>,
    /// A hybrid's linear-attention buffers (`None` without linear-attention layers).
    pub linear: Option<LinearBuffers>,
}

/// What a linear-attention layer writes: f32 [tokens, ld] input projections (q, k, v, z,
/// beta, alpha), f32 [tokens, channels] convolved q, k, v, bf16 [tokens, value_dim] output.
pub struct LinearBuffers {
    pub mixed: DevicePtr,
    pub ld: usize,
    pub conv: DevicePtr,
    pub out: DevicePtr,
    /// f32 [tokens, value heads, GDN_CHUNK_ROW]: the chunked delta rule's per-chunk matrices.
    pub chunk: DevicePtr,
}

/// What a mixture-of-experts MLP writes besides the dense MLP's buffers, for `tokens` tokens
/// routed to `k` experts each (`tokens k` routed rows). Nothing is sized by the expert count
/// times the batch except the router's logits.
pub struct MoeBuffers {
    /// f32 [tokens, experts].
    pub logits: DevicePtr,
    pub routing: MoeRouting,
    /// bf16 [routed rows, width]: SwiGLU of the experts' gate/up; f32 [routed rows, hidden].
    pub act: DevicePtr,
    pub down: DevicePtr,
    /// qwen2_moe's shared expert: f32 [tokens] gate logits and f32 [tokens, hidden] output.
    pub shared_score: DevicePtr,
    pub shared_out: DevicePtr,
}

/// Most bytes of the dequantizing scratch: a larger matrix (an LM head) goes through it in
/// slabs of rows.
const DEQUANT_SCRATCH_MAX: usize = 256 << 20;

impl Workspace {
    pub fn new(
        stream: &Arc<CudaStream>,
        c: &ModelConfig,
        cap: Capacity,
        decode_slots: usize,
        largest_quantized: usize,
        batch_invariant: bool,
    ) -> anyhow::Result<Workspace> {
        let (t, hidden) = (cap.tokens, c.hidden_size);
        // The dense MLP's buffers also serve qwen2_moe's shared expert.
        let shared_width = c
            .moe
            .as_ref()
            .and_then(|m| m.shared_expert_intermediate_size);
        let inter = c.intermediate_size.max(shared_width.unwrap_or(0));
        let (q_dim, kv_dim) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        // Gated attention's output gate follows V in the QKV rows.
        let gate_dim = if c.block.attn_output_gate { q_dim } else { 0 };
        let most_partials = (1..=cap.seqs)
            .map(|d| d * decode_splits(d, c.num_kv_heads, decode_slots, None, batch_invariant))
            .max()
            .unwrap_or(1);
        let mut l = Layout::new();
        let x = l.take(t * hidden * 4);
        let delta = l.take(t * hidden * 4);
        let xn = l.take(t.max(cap.logit_rows) * hidden * 2);
        let qkv = l.take(t * (q_dim + 2 * kv_dim + gate_dim) * 4);
        let q = l.take(t * q_dim * 2);
        let attn = l.take(t * q_dim * 2);
        let gate_up = l.take(t * 2 * inter * 4);
        let act = l.take(t * inter * 2);
        let logits = l.take(cap.logit_rows * c.vocab_size * 4);
        let part_acc = l.take(most_partials * c.num_heads * c.head_dim * 4);
        let part_ml = l.take(most_partials * c.num_heads * 2 * 4);
        let seq_splits = l.take(cap.seqs * 4);
        let sample_rows = l.take(cap.logit_rows * 4);
        let sample_params = l.take(cap.logit_rows * std::mem::size_of::<SampleParams>());
        let sampled = l.take(cap.logit_rows * 4);
        let sample_partials = l.take(Kernels::sample_partials_len(cap.logit_rows, c.vocab_size));
        let mask_rows = l.take(cap.logit_rows * 4);
        let mask_words = l.take(cap.logit_rows * c.vocab_size.div_ceil(32) * 4);
        let dequant_bytes = largest_quantized.min(DEQUANT_SCRATCH_MAX);
        let dequant = l.take(dequant_bytes);
        let moe = c.moe.as_ref().map(|m| {
            let rows = t * m.experts_per_token;
            let width = m.expert_intermediate_size;
            [
                l.take(t * m.num_experts * 4),
                l.take(rows * 4),
                l.take(rows * 4),
                l.take(rows * 4),
                l.take(rows * 4),
                l.take(moe_max_items(rows, m.num_experts, MOE_CHUNKS[0]) * 16),
                l.take(rows * width * 2),
                l.take(rows * hidden * 4),
                l.take(t * 4),
                l.take(t * hidden * 4),
            ]
        });
        let linear = c.linear_attention.as_ref().map(|g| {
            let key_dim = g.num_key_heads * g.key_head_dim;
            let value_dim = g.num_value_heads * g.value_head_dim;
            let channels = 2 * key_dim + value_dim;
            let ld = channels + value_dim + 2 * g.num_value_heads;
            (
                ld,
                [
                    l.take(t * ld * 4),
                    l.take(t * channels * 4),
                    l.take(t * value_dim * 2),
                    l.take(t * g.num_value_heads * GDN_CHUNK_ROW * 4),
                ],
            )
        });
        let buf = DeviceBuffer::new(stream, l.bytes())?;
        let linear = linear.map(|(ld, at)| LinearBuffers {
            mixed: buf.at(at[0]),
            ld,
            conv: buf.at(at[1]),
            out: buf.at(at[2]),
            chunk: buf.at(at[3]),
        });
        let moe = moe.map(|at| MoeBuffers {
            logits: buf.at(at[0]),
            routing: MoeRouting {
                ids: buf.at(at[1]),
                weights: buf.at(at[2]),
                row_of_choice: buf.at(at[3]),
                token_of_row: buf.at(at[4]),
                items: buf.at(at[5]),
            },
            act: buf.at(at[6]),
            down: buf.at(at[7]),
            shared_score: buf.at(at[8]),
            shared_out: buf.at(at[9]),
        });
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
            seq_splits: buf.at(seq_splits),
            sample_rows: buf.at(sample_rows),
            sample_params: buf.at(sample_params),
            sampled: buf.at(sampled),
            sample_partials: buf.at(sample_partials),
            mask_rows: buf.at(mask_rows),
            mask_words: buf.at(mask_words),
            dequant: Scratch {
                ptr: buf.at(dequant),
                bytes: dequant_bytes,
            },
            moe,
            linear,
            cap,
            buf,
        })
    }

    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}
