//! ferrite's model side: reading weights (GGUF, safetensors), model configs, tokenizers, and
//! fetching models.

pub mod config;
pub mod dequant;
pub mod dummy;
pub mod gguf;
pub mod hf;
pub mod hub;
pub mod tokenizer;
pub mod weights;

#[cfg(test)]
mod test_models;
