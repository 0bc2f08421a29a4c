//! Mixtral: Mistral's attention with a mixture of SwiGLU experts in every layer, each as wide
//! as `intermediate_size` (`num_local_experts`, w1 gate / w3 up / w2 down), the chosen
//! probabilities always renormalised. (llama.cpp converts Mixtral to `llama` GGUF files.)

use super::mistral::Mistral;
use crate::arch::Family;
use crate::config::ModelConfig;
use crate::hf::{HfConfig, HfError, MoeConvention};

pub(super) const FAMILIES: &[&dyn Family] = &[&Mixtral];

/// transformers' MixtralSparseMoeBlock: a softmax over the chosen logits, which is the
/// renormalised top-k of the softmax over all.
const MIXTRAL_EXPERTS: MoeConvention = MoeConvention {
    own_expert_width: false,
    sparse_step: false,
    shared_expert: false,
    always_renormalise: true,
};

pub struct Mixtral;

impl Family for Mixtral {
    fn hf_class(&self) -> Option<&'static str> {
        Some("MixtralForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("mixtral")
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        let mut config = Mistral.from_hf(c)?;
        config.moe = c.moe(&MIXTRAL_EXPERTS)?;
        Ok(config)
    }
}
