//! The names of the kernels the backend launches, checked at load so that a missing one fails
//! at start-up rather than at its first launch.

/// Every kernel but the GEMVs.
pub(super) const NAMES: &[&str] = &[
    "embedding_gather",
    "add_rmsnorm",
    "rmsnorm_rows",
    "rope_kv_write",
    "silu_mul",
    "gelu_tanh_mul",
    "attention_decode_hd16",
    "attention_decode_hd32",
    "attention_decode_hd64",
    "attention_decode_hd128",
    "attention_decode_hd256",
    "attention_decode_reduce",
    "attention_prefill_hd16",
    "attention_prefill_hd32",
    "attention_prefill_hd64",
    "attention_prefill_hd128",
    "attention_prefill_hd256",
    "sample_partial",
    "sample_tokens",
    "apply_token_mask",
    "dummy_fill_bf16",
    "dummy_fill_f32",
];

/// Largest token count the GEMV kernels take.
pub const GEMV_MAX_TOKENS: usize = 8;

/// The GEMV kernels by split (1, 4, 8 warps per row) and token count.
pub(super) const GEMV_NAMES: [[&str; GEMV_MAX_TOKENS]; 3] = [
    [
        "gemv_bf16_1_s1",
        "gemv_bf16_2_s1",
        "gemv_bf16_3_s1",
        "gemv_bf16_4_s1",
        "gemv_bf16_5_s1",
        "gemv_bf16_6_s1",
        "gemv_bf16_7_s1",
        "gemv_bf16_8_s1",
    ],
    [
        "gemv_bf16_1_s4",
        "gemv_bf16_2_s4",
        "gemv_bf16_3_s4",
        "gemv_bf16_4_s4",
        "gemv_bf16_5_s4",
        "gemv_bf16_6_s4",
        "gemv_bf16_7_s4",
        "gemv_bf16_8_s4",
    ],
    [
        "gemv_bf16_1_s8",
        "gemv_bf16_2_s8",
        "gemv_bf16_3_s8",
        "gemv_bf16_4_s8",
        "gemv_bf16_5_s8",
        "gemv_bf16_6_s8",
        "gemv_bf16_7_s8",
        "gemv_bf16_8_s8",
    ],
];
