//! Llama 1-3.x and its relatives (SmolLM2; Mistral and Mixtral as llama.cpp converts them):
//! SwiGLU, no biases, Llama 3 RoPE scaling. Hugging Face's Q/K rows are permuted at load into
//! the interleaved layout llama.cpp's converter writes, so both formats run one way.

use crate::arch::Family;
use crate::config::{Activation, Arch, BlockVariant, ModelConfig, RopeStyle};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{HfConfig, HfError, HfTranslation, RopeDefaults};

pub(super) const FAMILIES: &[&dyn Family] = &[&Llama];

pub struct Llama;

impl Family for Llama {
    fn hf_class(&self) -> Option<&'static str> {
        Some("LlamaForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("llama")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["llama"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(false)?;
        let rope = c.rope(RopeDefaults::PLAIN)?;
        let windows = c.layer_windows(None, |_| false)?;
        let block = BlockVariant {
            activation: c.activation(Activation::Silu, false)?,
            ..BlockVariant::llama(c.head_dim())
        };
        Ok(c.model_config(HfTranslation {
            arch: Arch::Llama,
            rope,
            windows,
            block,
            rope_style: RopeStyle::Interleaved,
            tied_by_default: false,
            qkv_bias: false,
            moe: None,
            linear_attention: None,
        }))
    }

    /// llama.cpp writes Mistral and Mixtral as `llama` too; a file with `expert_count` is a
    /// Mixtral, whose chosen expert weights are renormalised.
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        g.base(Arch::Llama, RopeStyle::Interleaved, true)
    }

    fn hf_qk_interleaved(&self) -> bool {
        true
    }
}
