//! Typed launch wrappers for the kernels of kernels/*.cu: one method of [`Kernels`] per
//! kernel, taking device addresses ([`DevicePtr`](crate::device_ptr::DevicePtr)) and sizes,
//! computing the launch shape, enqueuing on the backend's stream. A launcher with more than a
//! handful of arguments takes them as a struct with named fields. Every launcher fills its
//! kernel's parameter struct from `signatures`, the one declaration of each kernel's
//! parameters in the order of its `.cu` signature, which packs them.
//!
//! Named `launchers` so that one folder is called kernels (the `.cu` sources). One file here
//! per kernel family of kernels/*.cu (some launch several `.cu` files); `launch` holds the
//! loading and launching they share, `signatures` every kernel's parameters, `names` the
//! instantiations of the kernel families, `support` the model shapes they can run.

mod attention;
mod dummy_init;
mod eagle3;
mod embedding;
mod expert_format;
mod fp8_activation;
mod gated_activation;
mod gated_deltanet;
mod gemv;
mod launch;
mod moe;
mod mtp;
mod names;
mod quant;
mod rmsnorm;
mod rope_kv;
mod sampling;
mod signatures;
mod support;

pub use attention::{
    decode_splits, AttentionDims, AttentionMask, DecodeArgs, PrefillArgs, HEAD_DIMS, MAX_GROUP,
    MAX_SPLITS,
};
pub use dummy_init::DummyFormat;
pub use eagle3::Eagle3InputArgs;
pub use embedding::Lookup;
pub use expert_format::{ExpertFormat, ExpertMatrix, EXPERT_QUANT_TYPES};
pub use fp8_activation::FP8_BLOCK;
pub use gated_deltanet::{
    GdnLayer, GdnRecurrenceArgs, GdnSequences, GDN_CHUNK_ROW, GDN_MAX_DK, GDN_MAX_DV, GDN_MAX_TAPS,
    GDN_TOKENWISE_MAX_LEN,
};
pub use gemv::{gemv_split, tensor_core_k, LinearArgs, SKINNY_MAX_TOKENS};
pub use launch::Kernels;
pub use moe::{
    moe_chunk, moe_max_items, ExpertActivation, ExpertCounters, MoeDownArgs, MoeGateUpArgs,
    MoeRouting, MOE_CHUNKS, MOE_MAX_EXPERTS, MOE_MAX_K,
};
pub use mtp::MtpInputArgs;
pub use names::GEMV_MAX_TOKENS;
pub use quant::QuantGemvArgs;
pub use rmsnorm::{AddRmsNormArgs, RmsNormRowsArgs};
pub use rope_kv::RopeKvArgs;
pub use sampling::{SampleArgs, SampleParams};
pub use support::supports;
