//! Every kernel's signature, declared once: its name (or its family's, for the kernels a
//! `.cu` macro instantiates) and its parameters in the order of the `extern "C"` declaration,
//! each with its kind. Each row becomes a parameter struct with named fields that the
//! launchers fill and that packs itself (`KernelParams::args`, sizes converted to `int` with
//! a check); `SIGNATURES` lists the rows for the load-time check that every kernel exists,
//! and a host-only test (`cu_check`) reads kernels/*.cu and holds every row against its
//! declaration.

mod args;
#[cfg(test)]
mod cu_check;
#[cfg(test)]
mod cuda_decls;
#[cfg(test)]
mod cuda_macros;
mod declare;

use std::any::TypeId;

use args::Args;
pub(super) use args::MAX_PARAMS;
use declare::{kernel_signatures, Names, ParamKind};
pub(super) use declare::{KernelParams, Signature};

use super::names;
use crate::device_ptr::DevicePtr;

kernel_signatures! {
    // attention_decode.cu

    /// Split-K flash-decoding of one query row per sequence, by head_dim.
    AttentionDecode = family("attention_decode_hd{HD}", names::decode_names) {
        q: Ptr, k_cache: Ptr, v_cache: Ptr, pages: Ptr, page_offsets: Ptr, ctx_lens: Ptr,
        q_rows: Ptr, out: Ptr, part_acc: Ptr, part_ml: Ptr, seq_splits_out: Ptr,
        num_kv_heads: Count, group: Count, page_size: Count, scale_log2: F32, window: Count,
        sinks: NullablePtr,
    }
    /// The reduce of decode attention's splits.
    AttentionDecodeReduce = kernel("attention_decode_reduce") {
        part_acc: Ptr, part_ml: Ptr, seq_splits: Ptr, q_rows: Ptr, out: Ptr, num_splits: Count,
        head_dim: Count, sinks: NullablePtr,
    }

    // attention_prefill.cu

    /// Flash attention of prefill chunks over their paged prefix, by head_dim.
    AttentionPrefill = family("attention_prefill_hd{HD}", names::prefill_names) {
        q: Ptr, k_cache: Ptr, v_cache: Ptr, pages: Ptr, page_offsets: Ptr, q_starts: Ptr,
        q_lens: Ptr, pos0s: Ptr, out: Ptr, num_kv_heads: Count, group: Count, page_size: Count,
        scale_log2: F32, window: Count, sinks: NullablePtr,
    }

    // dummy_init.cu

    /// `--load-format dummy` weights drawn into bf16.
    DummyFillBf16 = kernel("dummy_fill_bf16") {
        out: Ptr, n: U64, seed: U64, scale: F32, offset: F32,
    }
    /// `--load-format dummy` weights drawn into f32, `shift` added.
    DummyFillF32 = kernel("dummy_fill_f32") {
        out: Ptr, n: U64, seed: U64, scale: F32, offset: F32, shift: F32,
    }

    // eagle3.cu

    /// f32 rows into a column band of wider bf16 rows (the target's captured layer inputs).
    CaptureRows = kernel("capture_rows") { x: Ptr, out: Ptr, hidden: Count, ld: Count, col: Count }
    /// An EAGLE-3 head's input rows and residual from embeddings and hidden rows.
    Eagle3Input = kernel("eagle3_input") {
        emb: Ptr, step_rows: Ptr, ring: Ptr, src: Ptr, input_norm_w: Ptr, hidden_norm_w: Ptr,
        out: Ptr, resid: Ptr, hidden: Count, eps: F32, residual_normed: I32,
    }
    /// Draft-vocabulary logits spread over the target's vocabulary, -inf elsewhere.
    ScatterDraftLogits = kernel("scatter_draft_logits") {
        draft: Ptr, d2t: Ptr, logits: Ptr, draft_vocab: Count, vocab: Count,
    }

    // embedding.cu

    /// Embedding rows of a bf16 table, scaled, into f32.
    EmbeddingGather = kernel("embedding_gather") {
        table: Ptr, tokens: Ptr, x: Ptr, hidden: Count, scale: F32,
    }

    // fp8_activation.cu

    /// Activations quantized to e4m3 per token and block of 128.
    Fp8QuantizeRows = kernel("fp8_quantize_rows") {
        x: Ptr, q: Ptr, scales: Ptr, n: Count, n_valid: Count, k: Count,
    }
    /// An FP8 matrix's scales transposed to block-major.
    Fp8ScalesByK = kernel("fp8_scales_by_k") { by_row: Ptr, by_k: Ptr, rows: Count, blocks: Count }
    /// A padded product's rows copied into the output.
    CopyRowsF32 = kernel("copy_rows_f32") { src: Ptr, y: Ptr, m: Count, ldy: Count }

    // fp8_gemv_mma.cu

    /// 2..8 tokens' product on an FP8 matrix through the tensor cores, by split.
    Fp8GemvMma = family("fp8_gemv_mma_s{SPLIT}", names::fp8_mma_names) {
        scales: Ptr, q: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count, ldy: Count, n: Count,
    }

    // gated_activation.cu

    /// act(gate) * up, from f32 or bf16 gate/up.
    GatedActivation = kernels(
        SILU = "silu_mul",
        GELU_TANH = "gelu_tanh_mul",
        SILU_BF16 = "silu_mul_bf16",
        GELU_TANH_BF16 = "gelu_tanh_mul_bf16",
    ) {
        gate_up: Ptr, out: Ptr, inter: Count,
    }

    // gated_deltanet.cu

    /// The causal depthwise convolution (then SiLU) of linear-attention layers.
    GdnConv = kernel("gdn_conv") {
        mixed: Ptr, ld: Count, taps: Ptr, state: Ptr, seq_row: Ptr, seq_len: Ptr,
        seq_slot: Ptr, seq_fresh: Ptr, slot_stride: U64, layer_offset: U64, out: Ptr,
        channels: Count, num_taps: Count,
    }
    /// The gated delta rule of linear-attention layers, with their gated output norm.
    GdnRecurrence = kernel("gdn_recurrence") {
        conv: Ptr, mixed: Ptr, ld: Count, z_col: Count, b_col: Count, a_col: Count, decay_rate: Ptr,
        dt_bias: Ptr, norm_w: Ptr, state: Ptr, seq_row: Ptr, seq_len: Ptr, seq_slot: Ptr,
        seq_fresh: Ptr, slot_stride: U64, layer_offset: U64, out: Ptr, key_heads: Count,
        value_heads: Count, dk: Count, dv: Count, tiled: I32, eps: F32, tokenwise_max_len: I32,
    }
    /// The newest convolution inputs of sequences longer than one of gdn_conv's tiles.
    GdnConvSave = kernel("gdn_conv_save") {
        mixed: Ptr, ld: Count, state: Ptr, seq_row: Ptr, seq_len: Ptr, seq_slot: Ptr,
        slot_stride: U64, layer_offset: U64, channels: Count, num_taps: Count,
    }

    // gated_deltanet_chunked.cu

    /// What the chunked delta rule needs of each 64-token chunk besides the state.
    GdnChunkPrep = kernel("gdn_chunk_prep") {
        conv: Ptr, mixed: Ptr, ld: Count, b_col: Count, a_col: Count, decay_rate: Ptr,
        dt_bias: Ptr, chunk: Ptr, seq_row: Ptr, seq_len: Ptr, seq_slot: Ptr, key_heads: Count,
        value_heads: Count, dk: Count, dv: Count, tiled: I32, tokenwise_max_len: I32,
    }
    /// The gated delta rule of prompt chunks, 64 tokens at a time (the WY form).
    GdnChunked = kernel("gdn_chunked") {
        conv: Ptr, chunk: Ptr, state: Ptr, seq_row: Ptr, seq_len: Ptr, seq_slot: Ptr,
        seq_fresh: Ptr, slot_stride: U64, layer_offset: U64, key_heads: Count,
        value_heads: Count, dk: Count, dv: Count, tiled: I32, tokenwise_max_len: I32,
    }
    /// The gated output norm of gdn_chunked's outputs, into bf16.
    GdnGatedNorm = kernel("gdn_gated_norm") {
        conv: Ptr, channels: Count, v_col: Count, mixed: Ptr, ld: Count, z_col: Count,
        norm_w: Ptr, out: Ptr, dv: Count, eps: F32,
    }
    /// Gated attention's output gate.
    SigmoidGateMul = kernel("sigmoid_gate_mul") { out: Ptr, gate_rows: Ptr, ld: Count, width: Count }

    // gemv.cu

    /// The bf16 GEMV on the CUDA cores, by token count and split.
    GemvBf16 = family("gemv_bf16_{NT}_s{SPLIT}", names::gemv_names) {
        w: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count, ldy: Count,
    }

    // gemv_mma.cu

    /// The skinny bf16 product on the tensor cores, by token groups and split.
    GemvMmaBf16 = family("gemv_mma_bf16_t{T}_s{SPLIT}", names::gemv_mma_names) {
        w: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count, ldy: Count, n: Count,
    }

    // moe.cu

    /// Routing of tokens to experts: each token's k experts and weights.
    MoeRoute = kernel("moe_route") {
        logits: Ptr, experts: Count, k: Count, normalize: I32, n: Count, ids: Ptr, weights: Ptr,
        bias: NullablePtr,
    }
    /// Grouping of the routed choices by expert into work items.
    MoeGroup = kernel("moe_group") {
        ids: Ptr, experts: Count, k: Count, n: Count, row_of_choice: Ptr, token_of_row: Ptr,
        items: Ptr, chunk: Count, max_items: Count, slots: NullablePtr, load: NullablePtr,
    }
    /// The weighted sum of a token's expert outputs, plus the gated shared expert.
    MoeCombine = kernel("moe_combine") {
        ys: Ptr, row_of_choice: Ptr, weights: Ptr, k: Count, hidden: Count,
        shared_out: NullablePtr, shared_score: NullablePtr, out: Ptr,
    }

    // moe_experts.cu

    /// The experts' gate/up with their activation, by weight format, split and item size.
    MoeGateUp = family("moe_gate_up_{FMT}_s{SPLIT}_r{ROWS}", names::moe_gate_up_names) {
        gate: Ptr, gate_e: NullablePtr, up: Ptr, up_e: NullablePtr, width: Count, x: Ptr,
        token_of_row: Ptr, items: Ptr, act: Ptr, k: Count, gate_bias: NullablePtr,
        up_bias: NullablePtr, clamped: I32, alpha: F32, limit: F32,
    }
    /// The experts' down projection, by weight format, split and item size.
    MoeDown = family("moe_down_{FMT}_s{SPLIT}_r{ROWS}", names::moe_down_names) {
        down: Ptr, down_e: NullablePtr, rows: Count, act: Ptr, items: Ptr, y: Ptr, k: Count,
        bias: NullablePtr,
    }

    // moe_tile.cu

    /// The experts' gate/up with their activation in 128 x 128 tiles, by weight format.
    MoeTileGateUp = family("moe_tile_gate_up_{FMT}", names::moe_tile_gate_up_names) {
        gate: Ptr, gate_e: NullablePtr, up: Ptr, up_e: NullablePtr, width: Count, x: Ptr,
        token_of_row: Ptr, items: Ptr, act: Ptr, k: Count, gate_bias: NullablePtr,
        up_bias: NullablePtr, clamped: I32, alpha: F32, limit: F32, split: Count,
    }
    /// The experts' down projection in 128 x 128 tiles, by weight format.
    MoeTileDown = family("moe_tile_down_{FMT}", names::moe_tile_down_names) {
        down: Ptr, down_e: NullablePtr, rows: Count, act: Ptr, items: Ptr, y: Ptr, k: Count,
        bias: NullablePtr, split: Count,
    }

    // mtp.cu

    /// A multi-token-prediction layer's input rows from embeddings and hidden states.
    MtpInput = kernel("mtp_input") {
        emb: Ptr, step_rows: Ptr, ring: Ptr, src: Ptr, first_norm: Ptr, output_norm_w: Ptr,
        head_norm_w: Ptr, enorm_w: Ptr, hnorm_w: Ptr, out: Ptr, hidden: Count, eps: F32,
    }
    /// Rows of f32 copied between two buffers by row index.
    CopyRows = kernel("copy_rows") {
        src: Ptr, src_rows: Ptr, dst: Ptr, dst_rows: Ptr, hidden: Count,
    }

    // quant_dequant.cu

    /// Rows of a quantized matrix into bf16, by format; unused planes NULL.
    Qdequant = family("qdequant_{NAME}", names::qdequant_names) {
        p0: NullablePtr, p1: NullablePtr, p2: NullablePtr, out: Ptr, row0: Count, rows: Count,
        k: Count,
    }
    /// Embedding rows of a quantized table, scaled, into f32, by format.
    Qembed = family("qembed_{NAME}", names::qembed_names) {
        p0: NullablePtr, p1: NullablePtr, p2: NullablePtr, tokens: Ptr, x: Ptr, hidden: Count,
        scale: F32,
    }

    // quant_gemv.cu

    /// The quantized GEMV on the CUDA cores, by format, token count and split.
    Qgemv = family("qgemv_{NAME}_{NT}_s{SPLIT}", names::qgemv_names) {
        p0: NullablePtr, p1: NullablePtr, p2: NullablePtr, x: Ptr, y: Ptr, rows: Count,
        k: Count, ldy: Count,
    }

    // quant_gemv_mma.cu

    /// One token's product on a Q4_K matrix through the tensor cores, by split.
    QgemvMmaQ4K = family("qgemv_mma_q4_k_1_s{SPLIT}", names::qmma_q4_k_names) {
        w: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count, ldy: Count,
    }
    /// One token's product on a Q6_K matrix (quants and scales, d) through the tensor cores.
    QgemvMmaQ6K = family("qgemv_mma_q6_k_1_s{SPLIT}", names::qmma_q6_k_names) {
        p0: Ptr, p1: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count,
    }

    // quant_gemv_ordered.cu

    /// The batch-invariant quantized product of up to 8 tokens, by format and split.
    QgemvOrdered = family("qgemv_ordered_{NAME}_s{SPLIT}", names::ordered_qgemv_names) {
        p0: NullablePtr, p1: NullablePtr, p2: NullablePtr, x: Ptr, y: Ptr, rows: Count,
        k: Count, ldy: Count, n: Count,
    }
    /// The same product for 9..64 tokens (groups of 8 sharing each decoded block).
    QgemvOrderedWide = family(
        "qgemv_ordered_wide_{NAME}_s{SPLIT}", names::ordered_wide_qgemv_names
    ) {
        p0: NullablePtr, p1: NullablePtr, p2: NullablePtr, x: Ptr, y: Ptr, rows: Count,
        k: Count, ldy: Count, n: Count,
    }

    // rmsnorm.cu

    /// The residual add fused with RMSNorm.
    AddRmsNorm = kernel("add_rmsnorm") {
        x: Ptr, delta: NullablePtr, weight: Ptr, rows: NullablePtr, out: Ptr, hidden: Count,
        eps: F32, bias: NullablePtr,
    }
    /// RMSNorm in place of f32 rows.
    RmsNormRows = kernel("rmsnorm_rows") {
        x: Ptr, weight: Ptr, rows: Count, heads: Count, token_stride: Count, dim: Count, eps: F32,
    }

    // rope_kv.cu

    /// QKV bias, rotary embedding and the K/V write, from an f32 or a bf16 QKV.
    RopeKvWrite = kernels(QKV_F32 = "rope_kv_write", QKV_BF16 = "rope_kv_write_bf16") {
        qkv: Ptr, bias: NullablePtr, positions: Ptr, slots: Ptr, inv_freq: Ptr, q_out: Ptr,
        k_cache: Ptr, v_cache: Ptr, num_heads: Count, num_kv_heads: Count, head_dim: Count,
        rotary_dim: Count, row_stride: Count, page_size: Count, interleaved: I32,
    }

    // sampling.cu

    /// Per-chunk winners of each sampled row.
    SamplePartial = kernel("sample_partial") {
        logits: Ptr, rows: Ptr, params: Ptr, part_v: Ptr, part_i: Ptr, vocab: Count,
    }
    /// The pick per row from the chunk winners.
    SampleTokens = kernel("sample_tokens") {
        logits: Ptr, rows: Ptr, params: Ptr, tokens: Ptr, vocab: Count, part_v: Ptr,
        part_i: Ptr, chunks: Count,
    }
    /// Tokens a row's bit mask forbids set to -inf.
    ApplyTokenMask = kernel("apply_token_mask") {
        logits: Ptr, rows: Ptr, masks: Ptr, vocab: Count, words: Count,
    }

    // tile_mma.cu

    /// The batch-invariant bf16 product of many tokens in 128 x 128 tiles.
    TileMmaBf16 = kernel("tile_mma_bf16") {
        w: Ptr, x: Ptr, y: Ptr, rows: Count, k: Count, ldy: Count, n: Count, split: Count,
    }
}
