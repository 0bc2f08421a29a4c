//! ferrite's model side: reading weights (GGUF, safetensors), model configs, tokenizers, the
//! one scalar GGML dequantizer (the reference for every backend's fast paths), and random
//! dummy weights.

pub mod arch;
pub mod config;
pub mod dequant;
pub mod dummy;
pub mod fp8;
pub mod gguf;
pub mod hf;
pub mod hub;
pub mod load;
pub mod mapping;
pub mod plan;
mod progress;
pub mod quant;
pub mod rope_scaling;
pub mod tensor_names;
pub mod tokenizer;
pub mod weights;

#[cfg(test)]
mod testing;
