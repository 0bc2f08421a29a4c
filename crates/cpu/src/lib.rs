//! ferrite CPU backend: quantized weights dequantized on the fly, batch-invariant f32 kernels,
//! and the one config-driven decoder forward pass (llama, qwen2, qwen3, mistral, gemma3, and
//! their mixture-of-experts MLPs: qwen3_moe, qwen2_moe, mixtral) over a paged KV cache.
//!
//! The roles carry the same names as in the CUDA backend: `Model` (the forward pass, model.rs),
//! `ModelWeights` (the weights as it reads them), `KvCache` (the paged K/V storage) and
//! `Workspace` (the per-step scratch buffers).

mod attention_layer;
mod backend;
mod draft_head;
mod eagle3;
mod head_layer;
pub mod kernels;
pub mod kv_cache;
mod linear_attention;
mod model;
mod model_weights;
mod moe;
mod mtp;
mod per_layer_input;
pub mod quant;
mod recurrent_state;
pub mod simd;
mod weight_reader;

pub use backend::CpuBackend;
pub use simd::Isa;

#[cfg(test)]
mod testing;
