//! Hugging Face model directories: `config.json` and `*.safetensors`, tensors renamed to GGUF's
//! canonical names and llama's Q/K rows permuted for interleaved RoPE.

mod config;
mod generation;
mod moe_config;
mod names;
mod rope_config;
mod safetensors;

use std::path::Path;
use std::sync::Arc;

pub use self::config::config_from_json;
pub use self::generation::{
    generation_defaults_from_json, load_generation_defaults, GenerationDefaults,
};
pub use self::names::{canonical_name, permute_rows_for_interleaved_rope};
pub use self::safetensors::{shards_of_index, weight_files};

use crate::config::{Arch, ModelConfig};
use crate::weights::{ModelWeights, Storage, WeightTensor};

#[derive(Debug, thiserror::Error)]
pub enum HfError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("config.json is not a config ferrite understands: {0}")]
    Config(serde_json::Error),
    #[error("generation_config.json is not valid: {0}")]
    GenerationConfig(serde_json::Error),
    #[error("architecture {0} is not supported (Llama, Qwen2, Qwen3, Mistral, Gemma3, Qwen3Moe, Qwen2Moe and MixtralForCausalLM are)")]
    UnsupportedArch(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("bad weights: {0}")]
    Weights(String),
}

impl HfError {
    fn io(path: &Path, source: std::io::Error) -> HfError {
        HfError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

pub fn load_config(dir: &Path) -> Result<ModelConfig, HfError> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| HfError::io(&path, e))?;
    config_from_json(&text)
}

/// The config and every weight of a directory. Tensors stay memory-mapped except llama's
/// Q/K, which are permuted into owned copies.
pub fn load_dir(dir: &Path) -> Result<(ModelConfig, ModelWeights), HfError> {
    let config = load_config(dir)?;
    let mut weights = ModelWeights::default();
    for file in weight_files(dir)? {
        for (hf_name, tensor) in safetensors::read_file(&file)? {
            let Some(name) = canonical_name(config.arch, &hf_name) else {
                tracing::debug!(tensor = %hf_name, "ignoring tensor ferrite does not use");
                continue;
            };
            weights.tensors.insert(name, tensor);
        }
    }
    if config.tie_word_embeddings {
        // A tied checkpoint may still carry a copy of the embedding as lm_head; the model
        // uses the embedding.
        weights.tensors.remove("output.weight");
    } else if !weights.tensors.contains_key("output.weight") {
        return Err(HfError::Weights(
            "config says untied embeddings but there is no lm_head.weight".into(),
        ));
    }
    if config.arch == Arch::Llama {
        permute_llama_qk(&config, &mut weights)?;
    }
    Ok((config, weights))
}

fn permute_llama_qk(config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), HfError> {
    for layer in 0..config.num_layers {
        for (proj, heads) in [
            ("attn_q", config.num_heads),
            ("attn_k", config.num_kv_heads),
        ] {
            for kind in ["weight", "bias"] {
                let name = format!("blk.{layer}.{proj}.{kind}");
                let Some(tensor) = weights.tensors.get_mut(&name) else {
                    continue;
                };
                let rows = tensor.shape.first().copied().unwrap_or(0);
                if rows != heads * config.head_dim {
                    return Err(HfError::Weights(format!(
                        "`{name}` has {rows} rows, expected {heads} heads x {}",
                        config.head_dim
                    )));
                }
                let bytes = tensor.storage.bytes();
                let permuted =
                    permute_rows_for_interleaved_rope(bytes, bytes.len() / rows, config.head_dim);
                tensor.storage = Storage::Owned(Arc::new(permuted));
            }
        }
    }
    Ok(())
}

/// For `WeightTensor` users that want to know whether a load copied it.
pub fn is_mapped(tensor: &WeightTensor) -> bool {
    matches!(tensor.storage, Storage::Mapped { .. })
}
