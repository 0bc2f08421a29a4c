//! ferrite CPU backend: quantized weights dequantized on the fly, batch-invariant f32 kernels,
//! and the llama/qwen2 forward pass over a paged KV cache.

mod backend;
pub mod kernels;
pub mod kv_cache;
mod model;
mod model_weights;
pub mod quant;

pub use backend::CpuBackend;
pub use kernels::simd::Isa;

#[cfg(test)]
mod testing;
