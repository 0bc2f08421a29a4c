//! ferrite's model side: reading weights (GGUF, safetensors), model configs, tokenizers, and the
//! llama/qwen2 forward pass on the CPU backend.

pub mod config;
pub mod weights;
