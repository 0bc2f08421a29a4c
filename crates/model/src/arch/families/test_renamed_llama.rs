#![cfg(test)]
//! A test-only family: Llama's block in a checkpoint that names its tensors its own way
//! (`backbone.blocks.{i}.attn.wq`, ...). It shows that a dense family whose block
//! `ModelConfig` already expresses is this one file; its test loads the Llama fixture renamed
//! and must get exactly the tensors and config the Llama family reads from the original, which
//! the CPU backend runs at transformers' parity (crates/cpu/tests/arch_parity.rs).

use super::llama::Llama;
use crate::arch::Family;
use crate::config::ModelConfig;
use crate::hf::{HfConfig, HfError};

pub(super) const FAMILIES: &[&dyn Family] = &[&RenamedLlama];

pub struct RenamedLlama;

/// `(this family's module, the canonical name's part)`.
const LAYER_NAMES: [(&str, &str); 9] = [
    ("norm_attn", "attn_norm"),
    ("attn.wq", "attn_q"),
    ("attn.wk", "attn_k"),
    ("attn.wv", "attn_v"),
    ("attn.wo", "attn_output"),
    ("norm_mlp", "ffn_norm"),
    ("mlp.w_gate", "ffn_gate"),
    ("mlp.w_up", "ffn_up"),
    ("mlp.w_down", "ffn_down"),
];

impl Family for RenamedLlama {
    fn hf_class(&self) -> Option<&'static str> {
        Some("RenamedLlamaForCausalLM")
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        Llama.from_hf(c)
    }

    fn hf_tensor_name(&self, name: &str) -> Option<String> {
        match name {
            "backbone.embed.weight" => return Some("token_embd.weight".into()),
            "backbone.norm_out.weight" => return Some("output_norm.weight".into()),
            "head.weight" => return Some("output.weight".into()),
            _ => {}
        }
        let (layer, rest) = name.strip_prefix("backbone.blocks.")?.split_once('.')?;
        let (module, kind) = rest.rsplit_once('.')?;
        let (_, part) = LAYER_NAMES.iter().find(|(ours, _)| *ours == module)?;
        Some(format!("blk.{layer}.{part}.{kind}"))
    }

    fn hf_qk_interleaved(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use safetensors::SafeTensors;

    use super::LAYER_NAMES;
    use crate::testing::repo_root;

    /// This family's name of a Llama checkpoint's tensor.
    fn renamed(hf: &str) -> String {
        match hf {
            "model.embed_tokens.weight" => return "backbone.embed.weight".into(),
            "model.norm.weight" => return "backbone.norm_out.weight".into(),
            "lm_head.weight" => return "head.weight".into(),
            _ => {}
        }
        let (layer, module, kind) = crate::hf::layer_tensor(hf).expect("a layer tensor");
        let hf_module = |ours: &str| match ours {
            "norm_attn" => "input_layernorm".to_string(),
            "norm_mlp" => "post_attention_layernorm".to_string(),
            other => {
                let (group, w) = other.split_once('.').expect("a dotted module");
                let proj = match w {
                    "wq" => "q_proj",
                    "wk" => "k_proj",
                    "wv" => "v_proj",
                    "wo" => "o_proj",
                    "w_gate" => "gate_proj",
                    "w_up" => "up_proj",
                    _ => "down_proj",
                };
                let group = if group == "attn" { "self_attn" } else { group };
                format!("{group}.{proj}")
            }
        };
        let (ours, _) = LAYER_NAMES
            .iter()
            .find(|(ours, _)| hf_module(ours) == module)
            .unwrap_or_else(|| panic!("no renamed module for {hf}"));
        format!("backbone.blocks.{layer}.{ours}.{kind}")
    }

    /// The Llama fixture, its tensors renamed and its class this family's.
    fn write_renamed_copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(from.join("config.json")).unwrap())
                .unwrap();
        config["architectures"] = serde_json::json!(["RenamedLlamaForCausalLM"]);
        config["model_type"] = "renamed_llama".into();
        std::fs::write(to.join("config.json"), config.to_string()).unwrap();
        let bytes = std::fs::read(from.join("model.safetensors")).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let tensors: HashMap<String, _> = file
            .tensors()
            .into_iter()
            .map(|(name, view)| (renamed(&name), view))
            .collect();
        let out = safetensors::serialize(tensors, None).unwrap();
        std::fs::write(to.join("model.safetensors"), out).unwrap();
    }

    #[test]
    fn a_renamed_llama_loads_exactly_the_llama_model() {
        let original = repo_root().join("fixtures/arch/llama");
        let copy =
            std::env::temp_dir().join(format!("ferrite-renamed-llama-{}", std::process::id()));
        write_renamed_copy(&original, &copy);
        let (config, weights) = crate::load::hf_dir(&original).unwrap();
        let (renamed_config, renamed_weights) = crate::load::hf_dir(&copy).unwrap();
        std::fs::remove_dir_all(&copy).unwrap();

        assert_eq!(renamed_config, config);
        let mut names: Vec<_> = weights.tensors.keys().collect();
        let mut renamed_names: Vec<_> = renamed_weights.tensors.keys().collect();
        names.sort();
        renamed_names.sort();
        assert_eq!(renamed_names, names);
        assert!(names.contains(&&"blk.1.attn_q.weight".to_string()));
        for (name, tensor) in &weights.tensors {
            let other = &renamed_weights.tensors[name];
            assert_eq!(
                (other.dtype, &other.shape),
                (tensor.dtype, &tensor.shape),
                "{name}"
            );
            assert!(
                other.storage.bytes() == tensor.storage.bytes(),
                "{name} differs"
            );
        }
    }
}
