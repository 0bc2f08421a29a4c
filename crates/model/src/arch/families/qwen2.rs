//! Qwen2 / Qwen2.5: llama's block with biases on Q, K and V (`qkv_bias`, default on), in
//! Hugging Face's rotate-half layout; `sliding_window` only with `use_sliding_window`, from
//! layer `max_window_layers` on.

use crate::arch::Family;
use crate::config::{Activation, Arch, BlockVariant, ModelConfig, RopeStyle};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{HfConfig, HfError, HfTranslation, RopeDefaults};

pub(super) const FAMILIES: &[&dyn Family] = &[&Qwen2];

pub struct Qwen2;

impl Family for Qwen2 {
    fn hf_class(&self) -> Option<&'static str> {
        Some("Qwen2ForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("qwen2")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["qwen2"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(true)?;
        Ok(c.model_config(HfTranslation {
            qkv_bias: c.qkv_bias != Some(false),
            ..qwen_translation(c, Arch::Qwen2, false)?
        }))
    }

    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        qwen2_gguf(g, true)
    }
}

/// A qwen2 or qwen2moe file: biases on Q, K and V whether or not the file stores them.
/// `renormalise_experts`: whether chosen expert weights are renormalised when the file does
/// not say (llama.cpp: not for qwen2moe).
pub(super) fn qwen2_gguf(
    g: &GgufConfig,
    renormalise_experts: bool,
) -> Result<ModelConfig, GgufError> {
    Ok(ModelConfig {
        qkv_bias: true,
        ..g.base(Arch::Qwen2, RopeStyle::Halves, renormalise_experts)?
    })
}

/// What the Qwen families share: rotate-half RoPE, SwiGLU, windows only with
/// `use_sliding_window` and from `max_window_layers` on; Q/K norms (`qk_norm`, qwen3) and
/// no biases unless the caller says.
pub(super) fn qwen_translation(
    c: &HfConfig,
    arch: Arch,
    qk_norm: bool,
) -> Result<HfTranslation, HfError> {
    let rope = c.rope(RopeDefaults::PLAIN)?;
    // Qwen configs carry a `sliding_window` that only applies with use_sliding_window.
    let window = c
        .sliding_window
        .filter(|_| c.use_sliding_window == Some(true));
    let first_sliding = c.max_window_layers.unwrap_or(c.num_hidden_layers);
    let windows = c.layer_windows(window, |layer| layer >= first_sliding)?;
    let block = BlockVariant {
        qk_norm,
        activation: c.activation(Activation::Silu, false)?,
        ..BlockVariant::llama(c.head_dim())
    };
    Ok(HfTranslation {
        arch,
        rope,
        windows,
        block,
        rope_style: RopeStyle::Halves,
        tied_by_default: false,
        qkv_bias: false,
        moe: None,
        linear_attention: None,
    })
}
