//! Mistral: llama's block in Hugging Face's rotate-half layout, with `sliding_window` on every
//! layer when the config sets one. (llama.cpp converts Mistral to `llama` GGUF files.)

use crate::arch::Family;
use crate::config::{Activation, Arch, BlockVariant, ModelConfig, RopeStyle};
use crate::hf::{HfConfig, HfError, HfTranslation, RopeDefaults};

pub(super) const FAMILIES: &[&dyn Family] = &[&Mistral];

pub struct Mistral;

impl Family for Mistral {
    fn hf_class(&self) -> Option<&'static str> {
        Some("MistralForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("mistral")
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(false)?;
        let rope = c.rope(RopeDefaults::PLAIN)?;
        let windows = c.layer_windows(c.sliding_window, |_| true)?;
        let block = BlockVariant {
            activation: c.activation(Activation::Silu, false)?,
            ..BlockVariant::llama(c.head_dim())
        };
        Ok(c.model_config(HfTranslation {
            arch: Arch::Mistral,
            rope,
            windows,
            block,
            rope_style: RopeStyle::Halves,
            tied_by_default: false,
            qkv_bias: false,
            moe: None,
            linear_attention: None,
        }))
    }
}
