//! The Qwen mixtures of experts: Qwen3-MoE (Qwen3's attention) and Qwen2-MoE (Qwen2's, plus a
//! shared expert gated by `sigmoid(shared_expert_gate . x)`). Experts are
//! `moe_intermediate_size` wide; `decoder_sparse_step` and `mlp_only_layers` pick the sparse
//! layers; `norm_topk_prob` (default off) renormalises the chosen probabilities.

use super::qwen2::{qwen2_gguf, Qwen2};
use super::qwen3::Qwen3;
use crate::arch::Family;
use crate::config::ModelConfig;
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{HfConfig, HfError, MoeConvention};

pub(super) const FAMILIES: &[&dyn Family] = &[&Qwen3Moe, &Qwen2Moe];

const QWEN3_EXPERTS: MoeConvention = MoeConvention {
    own_expert_width: true,
    sparse_step: true,
    shared_expert: false,
    always_renormalise: false,
};

const QWEN2_EXPERTS: MoeConvention = MoeConvention {
    shared_expert: true,
    ..QWEN3_EXPERTS
};

pub struct Qwen3Moe;

impl Family for Qwen3Moe {
    fn hf_class(&self) -> Option<&'static str> {
        Some("Qwen3MoeForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("qwen3_moe")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["qwen3moe"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        let mut config = Qwen3.from_hf(c)?;
        config.moe = c.moe(&QWEN3_EXPERTS)?;
        Ok(config)
    }

    /// llama.cpp renormalises qwen3moe's chosen weights unless the file says otherwise.
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        Qwen3.from_gguf(g)
    }
}

pub struct Qwen2Moe;

impl Family for Qwen2Moe {
    fn hf_class(&self) -> Option<&'static str> {
        Some("Qwen2MoeForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("qwen2_moe")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["qwen2moe"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        let mut config = Qwen2.from_hf(c)?;
        config.moe = c.moe(&QWEN2_EXPERTS)?;
        Ok(config)
    }

    /// llama.cpp does not renormalise qwen2moe's chosen weights unless the file says so.
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        qwen2_gguf(g, false)
    }
}
