//! Qwen3 (dense): per-head RMSNorm on Q and K before RoPE, no biases, `head_dim` set by the
//! config; otherwise Qwen2's conventions.

use super::qwen2::qwen_translation;
use crate::arch::Family;
use crate::config::{Arch, BlockVariant, ModelConfig, RopeStyle};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{HfConfig, HfError};

pub(super) const FAMILIES: &[&dyn Family] = &[&Qwen3];

pub struct Qwen3;

impl Family for Qwen3 {
    fn hf_class(&self) -> Option<&'static str> {
        Some("Qwen3ForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("qwen3")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["qwen3"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(false)?;
        Ok(c.model_config(qwen_translation(c, Arch::Qwen3, true)?))
    }

    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        let config = g.base(Arch::Qwen3, RopeStyle::Halves, true)?;
        Ok(ModelConfig {
            block: BlockVariant {
                qk_norm: true,
                ..config.block
            },
            ..config
        })
    }
}
