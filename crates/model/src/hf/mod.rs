//! Hugging Face model directories, read generically: `config.json`'s fields (`HfConfig`),
//! `*.safetensors` (FP8 weights converted), the canonical tensor names of the llama-style
//! families and the Q/K row permutation for interleaved RoPE. What a config means is its
//! family's (`crate::arch`); `crate::load` puts the two together.

mod config;
mod eagle3;
pub mod fp8;
mod gemma4_fields;
mod generation;
mod linear_config;
mod moe_config;
mod mxfp4;
mod names;
mod rope_config;
pub(crate) mod safetensors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use self::config::{HfConfig, HfTranslation};
pub use self::eagle3::{eagle3_config, Eagle3Config};
pub use self::gemma4_fields::Gemma4Fields;
pub use self::generation::{
    generation_defaults_from_json, load_generation_defaults, GenerationDefaults,
};
pub use self::moe_config::MoeConvention;
pub use self::names::{
    canonical_name, layer_module, layer_tensor, permute_rows_for_interleaved_rope,
};
pub use self::rope_config::{Rope, RopeDefaults};
use self::safetensors::Stored;
pub use self::safetensors::{shards_of_index, weight_files};

use crate::config::ModelConfig;
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
    #[error("architecture {0}")]
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

/// The text of `dir/config.json`.
pub fn read_config(dir: &Path) -> Result<String, HfError> {
    let path = dir.join("config.json");
    std::fs::read_to_string(&path).map_err(|e| HfError::io(&path, e))
}

/// Every tensor of a directory's safetensors files under its Hugging Face name, mapped in
/// `pages` (see `mapping`). FP8 weights are re-laid in FP8 blocks or dequantized to f32
/// (`fp8`) as `config_text`'s `quantization_config` says.
pub fn read_tensors(
    dir: &Path,
    pages: MapPages,
    config_text: &str,
) -> Result<HashMap<String, WeightTensor>, HfError> {
    let fp8_config = fp8::fp8_config(config_text)?;
    let mut by_hf_name = HashMap::new();
    let mut fp8_weights = Vec::new();
    let mut bytes = HashMap::new();
    for file in weight_files(dir)? {
        for (hf_name, stored) in safetensors::read_file(&file, pages)? {
            match stored {
                Stored::Tensor(t) => {
                    by_hf_name.insert(hf_name, t);
                }
                Stored::Fp8(t) => fp8_weights.push((hf_name, t)),
                Stored::Bytes(t) => {
                    bytes.insert(hf_name, t);
                }
                Stored::Ints(_) => {
                    return Err(HfError::Weights(format!(
                        "`{hf_name}` holds integers, not weights: a model checkpoint has none"
                    )))
                }
            }
        }
    }
    // MXFP4 pairs, also possibly split over shards.
    let block_names: Vec<String> = bytes
        .keys()
        .filter(|n| n.ends_with("_blocks"))
        .cloned()
        .collect();
    for blocks_name in block_names {
        let name = blocks_name.trim_end_matches("_blocks").to_string();
        let (Some(blocks), Some(scales)) = (
            bytes.remove(&blocks_name),
            bytes.remove(&format!("{name}_scales")),
        ) else {
            return Err(HfError::Weights(format!(
                "`{blocks_name}` has no `{name}_scales` beside it"
            )));
        };
        by_hf_name.insert(name.clone(), mxfp4::load(&name, &blocks, &scales)?);
    }
    if let Some(name) = bytes.keys().next() {
        return Err(HfError::Weights(format!(
            "`{name}` is u8 but not an MXFP4 `_blocks` / `_scales` pair"
        )));
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
    Ok(by_hf_name)
}

/// Permutes every layer's Q and K rows (weights and biases, canonical names) from Hugging
/// Face's rotate-half layout into GGUF's interleaved one, into owned copies.
pub fn permute_qk_for_interleaved_rope(
    config: &ModelConfig,
    weights: &mut ModelWeights,
) -> Result<(), HfError> {
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
