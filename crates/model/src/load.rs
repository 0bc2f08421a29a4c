//! A model's files to its `ModelConfig` and `ModelWeights`: the generic readers (`hf`, `gguf`)
//! put together with the family the registry (`arch`) picks.

use std::path::Path;

use crate::arch::{gguf_family, hf_family, Family};
use crate::config::ModelConfig;
use crate::gguf::{GgufConfig, GgufError, GgufFile};
use crate::hf::{self, HfConfig, HfError};
use crate::mapping::MapPages;
use crate::plan::{eagle3 as head_names, Eagle3Spec};
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

/// An EAGLE-3 head read for its target: the spec, its weights under the names the spec gives
/// them (`Eagle3Spec::tensors`), and each draft id's target id.
#[derive(Debug)]
pub struct Eagle3Head {
    pub spec: Eagle3Spec,
    pub weights: ModelWeights,
    /// Target token id of each draft id (`i + d2t[i]`; `i` where the head has no `d2t`).
    pub draft_to_target: Vec<u32>,
    /// The head has its own LM head (else it scores with the target's) ...
    pub own_head: bool,
    /// ... and its own token embedding (else it reads the target's).
    pub own_embedding: bool,
}

/// An EAGLE-3 head's directory (EAGLE / SpecForge or speculators layout, see `hf::eagle3`)
/// for `target`. Tensors stay memory-mapped except the layer's Q and K rows where its family
/// permutes them.
pub fn eagle3_dir(
    dir: &Path,
    target: &ModelConfig,
    pages: MapPages,
) -> Result<Eagle3Head, HfError> {
    let text = hf::read_config(dir)?;
    let head_config = hf::eagle3_config(&text, target.num_layers, target.hidden_size)?;
    let (family, layer_config) = hf_family_config(&head_config.layer_config)?;
    let spec = Eagle3Spec::new(&layer_config, target, head_config.options)
        .map_err(|e| HfError::Unsupported(format!("EAGLE-3 head: {e}")))?;
    let mut weights = ModelWeights::default();
    let mut d2t = None;
    for file in hf::weight_files(dir)? {
        for (hf_name, stored) in hf::safetensors::read_file(&file, pages)? {
            let name = hf_name.strip_prefix("model.").unwrap_or(&hf_name);
            let tensor = match stored {
                hf::safetensors::Stored::Ints(values) if name == "d2t" => {
                    d2t = Some(values);
                    continue;
                }
                // The target-to-draft mask: the engines read the map the other way only.
                hf::safetensors::Stored::Ints(_) if name == "t2d" => continue,
                hf::safetensors::Stored::Tensor(t) => t,
                _ => {
                    return Err(HfError::Weights(format!(
                        "EAGLE-3 head: `{hf_name}` is of a type no head tensor has"
                    )))
                }
            };
            let canonical = match name {
                "fc.weight" => Some(head_names::FC.to_string()),
                "norm.weight" => Some(head_names::OUTPUT_NORM.to_string()),
                "lm_head.weight" => Some(head_names::OUTPUT.to_string()),
                "embed_tokens.weight" => Some(head_names::TOKEN_EMBD.to_string()),
                _ => match name
                    .strip_prefix("midlayer.")
                    .or_else(|| name.strip_prefix("layers.0."))
                {
                    Some("hidden_norm.weight") => Some(head_names::HIDDEN_NORM.to_string()),
                    // As layer 0 of the head's own config, moved after the target's below.
                    Some(rest) => family.hf_tensor_name(&format!("model.layers.0.{rest}")),
                    None => None,
                },
            };
            match canonical {
                Some(canonical) => {
                    weights.tensors.insert(canonical, tensor);
                }
                None => tracing::debug!(tensor = %hf_name, "ignoring tensor the head does not use"),
            }
        }
    }
    if family.hf_qk_interleaved() {
        hf::permute_qk_for_interleaved_rope(&layer_config, &mut weights)?;
    }
    let layer_prefix = format!("blk.{}.", spec.index());
    weights.tensors = std::mem::take(&mut weights.tensors)
        .into_iter()
        .map(|(name, t)| match name.strip_prefix("blk.0.") {
            Some(rest) => (format!("{layer_prefix}{rest}"), t),
            None => (name, t),
        })
        .collect();
    let own_head = weights.tensors.contains_key(head_names::OUTPUT);
    let own_embedding = weights.tensors.contains_key(head_names::TOKEN_EMBD);
    let draft_vocab = spec.options.draft_vocab;
    if !own_head && draft_vocab != spec.vocab_size {
        return Err(HfError::Weights(format!(
            "EAGLE-3 head: no lm_head.weight for its draft vocabulary of {draft_vocab}"
        )));
    }
    let draft_to_target = match d2t {
        None if draft_vocab == spec.vocab_size => (0..draft_vocab as u32).collect(),
        None => {
            return Err(HfError::Weights(
                "EAGLE-3 head: a draft vocabulary without the `d2t` map".into(),
            ))
        }
        Some(d2t) => draft_ids(&d2t, draft_vocab, spec.vocab_size)?,
    };
    for t in spec.tensors(own_head, own_embedding) {
        let tensor = weights
            .tensors
            .get(&t.name)
            .ok_or_else(|| HfError::Weights(format!("EAGLE-3 head: no tensor for `{}`", t.name)))?;
        if tensor.shape != t.shape {
            return Err(HfError::Weights(format!(
                "EAGLE-3 head: `{}` is {:?}, the config says {:?}",
                t.name, tensor.shape, t.shape
            )));
        }
    }
    Ok(Eagle3Head {
        spec,
        weights,
        draft_to_target,
        own_head,
        own_embedding,
    })
}

/// Each draft id's target id, `i + d2t[i]`, checked against the target's vocabulary.
fn draft_ids(d2t: &[i64], draft_vocab: usize, vocab: usize) -> Result<Vec<u32>, HfError> {
    if d2t.len() != draft_vocab {
        return Err(HfError::Weights(format!(
            "EAGLE-3 head: `d2t` has {} entries for a draft vocabulary of {draft_vocab}",
            d2t.len()
        )));
    }
    d2t.iter()
        .enumerate()
        .map(|(i, &offset)| {
            let id = i as i64 + offset;
            u32::try_from(id)
                .ok()
                .filter(|&id| (id as usize) < vocab)
                .ok_or_else(|| {
                    HfError::Weights(format!(
                        "EAGLE-3 head: draft id {i} maps to {id}, outside the vocabulary"
                    ))
                })
        })
        .collect()
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
