//! A model's files to its `ModelConfig` and `ModelWeights`: the generic readers (`hf`, `gguf`)
//! put together with the family the registry (`arch`) picks.

use std::path::Path;

use crate::arch::{gguf_family, hf_family, Family};
use crate::config::ModelConfig;
use crate::gguf::{GgufConfig, GgufError, GgufFile};
use crate::hf::{self, HfConfig, HfError};
use crate::mapping::MapPages;
use crate::weights::ModelWeights;

/// The family of a `config.json` text, and its `ModelConfig`.
fn hf_family_config(text: &str) -> Result<(&'static dyn Family, ModelConfig), HfError> {
    let fields = HfConfig::parse(text)?;
    let family = hf_family(&fields)?;
    Ok((family, family.from_hf(&fields)?))
}

/// The `ModelConfig` of a `config.json`, translated by its family.
pub fn hf_config(text: &str) -> Result<ModelConfig, HfError> {
    Ok(hf_family_config(text)?.1)
}

/// The config and every weight of a directory, under canonical names. Tensors stay
/// memory-mapped except Q/K rows a family permutes (owned copies) and FP8 weights, re-laid in
/// FP8 blocks or dequantized to f32 (`hf::fp8`).
pub fn hf_dir(dir: &Path) -> Result<(ModelConfig, ModelWeights), HfError> {
    hf_dir_with(dir, MapPages::Plain)
}

/// [`hf_dir`] with the weight files mapped in `pages` (see `mapping`).
pub fn hf_dir_with(dir: &Path, pages: MapPages) -> Result<(ModelConfig, ModelWeights), HfError> {
    let config_text = hf::read_config(dir)?;
    let (family, config) = hf_family_config(&config_text)?;
    let mut weights = ModelWeights::default();
    for (hf_name, tensor) in hf::read_tensors(dir, pages, &config_text)? {
        let Some(name) = family.hf_tensor_name(&hf_name) else {
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
    if family.hf_qk_interleaved() {
        hf::permute_qk_for_interleaved_rope(&config, &mut weights)?;
    }
    family.hf_finish(&config, &mut weights)?;
    Ok((config, weights))
}

/// The `ModelConfig` of GGUF metadata, translated by the family of `general.architecture`.
pub fn gguf_config(fields: GgufConfig) -> Result<ModelConfig, GgufError> {
    let arch_name = fields.meta.str("general.architecture")?;
    gguf_family(arch_name)?.from_gguf(&fields)
}

impl GgufFile {
    /// The file's `ModelConfig` (here rather than in `gguf`, which reads files and knows no
    /// family).
    pub fn config(&self) -> Result<ModelConfig, GgufError> {
        gguf_config(self.config_fields())
    }

    /// The file's config and weights under the names the layer plan reads: what the family
    /// rewrites at load (`Family::gguf_finish`) applied to [`GgufFile::weights`].
    pub fn model(&self) -> Result<(ModelConfig, ModelWeights), GgufError> {
        let fields = self.config_fields();
        let family = gguf_family(fields.arch_name())?;
        let config = family.from_gguf(&fields)?;
        let mut weights = self.weights();
        family.gguf_finish(&config, &mut weights)?;
        Ok((config, weights))
    }
}
