//! Hugging Face model directories: `config.json` and `*.safetensors`, tensors renamed to GGUF's
//! canonical names and llama's Q/K rows permuted for interleaved RoPE.

mod config;
pub mod fp8;
mod generation;
mod moe_config;
mod names;
mod rope_config;
mod safetensors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use self::config::config_from_json;
pub use self::generation::{
    generation_defaults_from_json, load_generation_defaults, GenerationDefaults,
};
pub use self::names::{canonical_name, permute_rows_for_interleaved_rope};
use self::safetensors::Stored;
pub use self::safetensors::{shards_of_index, weight_files};

use crate::config::{Arch, ModelConfig};
use crate::mapping::MapPages;
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
    config_from_json(&read_config(dir)?)
}

fn read_config(dir: &Path) -> Result<String, HfError> {
    let path = dir.join("config.json");
    std::fs::read_to_string(&path).map_err(|e| HfError::io(&path, e))
}

/// The config and every weight of a directory. Tensors stay memory-mapped except llama's
/// Q/K, which are permuted into owned copies, and FP8 weights, re-laid in FP8 blocks or
/// dequantized to f32 (`fp8`).
pub fn load_dir(dir: &Path) -> Result<(ModelConfig, ModelWeights), HfError> {
    load_dir_with(dir, MapPages::Plain)
}

/// [`load_dir`] with the weight files mapped in `pages` (see `mapping`).
pub fn load_dir_with(dir: &Path, pages: MapPages) -> Result<(ModelConfig, ModelWeights), HfError> {
    let config_text = read_config(dir)?;
    let config = config_from_json(&config_text)?;
    let fp8_config = fp8::fp8_config(&config_text)?;
    let mut by_hf_name = HashMap::new();
    let mut fp8_weights = Vec::new();
    for file in weight_files(dir)? {
        for (hf_name, stored) in safetensors::read_file(&file, pages)? {
            match stored {
                Stored::Tensor(t) => {
                    by_hf_name.insert(hf_name, t);
                }
                Stored::Fp8(t) => fp8_weights.push((hf_name, t)),
            }
        }
    }
    // Scales may sit in another shard than their weight: convert once all are read.
    for (hf_name, weight) in fp8_weights {
        let Some(fp8_config) = fp8_config else {
            return Err(HfError::Weights(format!(
                "`{hf_name}` is FP8 but config.json has no quantization_config"
            )));
        };
        let scale_name = [format!("{hf_name}_scale_inv"), format!("{hf_name}_scale")]
            .into_iter()
            .find(|n| by_hf_name.contains_key(n))
            .ok_or_else(|| {
                HfError::Weights(format!(
                    "`{hf_name}` is FP8 without a `{hf_name}_scale_inv` or `_scale` tensor"
                ))
            })?;
        let scale = by_hf_name.remove(&scale_name).expect("found above");
        let loaded = fp8::load(&weight, &scale_name, &scale, fp8_config)?;
        by_hf_name.insert(hf_name, loaded);
    }
    let mut weights = ModelWeights::default();
    for (hf_name, tensor) in by_hf_name {
        let Some(name) = canonical_name(config.arch, &hf_name) else {
            tracing::debug!(tensor = %hf_name, "ignoring tensor ferrite does not use");
            continue;
        };
        weights.tensors.insert(name, tensor);
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
