//! The mixture-of-experts part of a GGUF file, as llama.cpp writes and reads it:
//! `{arch}.expert_count`, `{arch}.expert_used_count`, `{arch}.expert_feed_forward_length`,
//! `{arch}.expert_shared_feed_forward_length` and, per layer, the router
//! `blk.N.ffn_gate_inp.weight` next to the stacked `blk.N.ffn_{gate,up,down}_exps.weight`.

use super::metadata::Metadata;
use super::reader::TensorInfo;
use super::GgufError;
use crate::config::MoeConfig;
use crate::tensor_names::{ExpertProj, LayerTensor};

/// llama.cpp's `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX`: the only gating implemented.
const GATING_SOFTMAX: usize = 1;

/// `None` when the file has no experts (`expert_count` absent or 0). `renormalise_default`:
/// whether the chosen weights are renormalised when the file does not say
/// (`expert_weights_norm`), as llama.cpp decides per architecture.
pub fn moe_from_metadata(
    meta: &Metadata,
    tensors: &[TensorInfo],
    arch_name: &str,
    num_layers: usize,
    renormalise_default: bool,
) -> Result<Option<MoeConfig>, GgufError> {
    let key = |suffix: &str| format!("{arch_name}.{suffix}");
    let num_experts = meta.opt_usize(&key("expert_count"))?.unwrap_or(0);
    if num_experts == 0 {
        return Ok(None);
    }
    let experts_per_token = meta.usize(&key("expert_used_count"))?;
    if experts_per_token == 0 || experts_per_token > num_experts {
        return Err(GgufError::Corrupt(format!(
            "{} is {experts_per_token} with {num_experts} experts",
            key("expert_used_count")
        )));
    }
    refuse_unimplemented(meta, &key)?;
    let dims_of = |name: &str| {
        tensors
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.dims.clone())
    };
    // The router is what makes a layer sparse: llama.cpp's qwen MoE graphs have one in every
    // layer, a file converted from a config with dense layers has the dense names there.
    let sparse_layers: Vec<bool> = (0..num_layers)
        .map(|i| dims_of(&LayerTensor::FfnGateInp.of(i)).is_some())
        .collect();
    let first = sparse_layers
        .iter()
        .position(|&s| s)
        .ok_or_else(|| GgufError::Corrupt("expert_count > 0 but no ffn_gate_inp".into()))?;
    // ne = [cols, rows, experts]: an expert's gate matrix has the expert width as rows.
    let expert_intermediate_size = match meta.opt_usize(&key("expert_feed_forward_length"))? {
        Some(width) => width,
        // Older Mixtral files store one matrix per expert (`ffn_gate.0`).
        None => dims_of(&LayerTensor::FfnGateExps.of(first))
            .or_else(|| dims_of(&ExpertProj::Gate.of_expert(first, 0)))
            .and_then(|d| d.get(1).copied())
            .ok_or_else(|| GgufError::MissingKey(key("expert_feed_forward_length")))?
            as usize,
    };
    let shared_expert_intermediate_size = match dims_of(&LayerTensor::FfnGateShexp.of(first)) {
        None => None,
        Some(dims) => Some(
            match meta.opt_usize(&key("expert_shared_feed_forward_length"))? {
                Some(width) => width,
                None => dims.get(1).copied().unwrap_or(0) as usize,
            },
        ),
    };
    let norm_topk_prob = meta
        .opt_bool(&key("expert_weights_norm"))?
        .unwrap_or(renormalise_default);
    Ok(Some(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size,
        norm_topk_prob,
        shared_expert_intermediate_size,
        sparse_layers,
        biases: false,
    }))
}

fn refuse_unimplemented(meta: &Metadata, key: &dyn Fn(&str) -> String) -> Result<(), GgufError> {
    if let Some(gating) = meta.opt_usize(&key("expert_gating_func"))? {
        if gating != GATING_SOFTMAX {
            return Err(GgufError::Unsupported(format!(
                "{} = {gating}: only softmax gating ({GATING_SOFTMAX}) is implemented",
                key("expert_gating_func")
            )));
        }
    }
    if let Some(scale) = meta.opt_f32(&key("expert_weights_scale"))? {
        // llama.cpp applies the scale only when it is neither 0 nor 1.
        if scale != 0.0 && scale != 1.0 {
            return Err(GgufError::Unsupported(format!(
                "{} = {scale} is not implemented",
                key("expert_weights_scale")
            )));
        }
    }
    for suffix in ["expert_group_count", "expert_shared_count"] {
        if meta.opt_usize(&key(suffix))?.is_some_and(|n| n > 1) {
            return Err(GgufError::Unsupported(format!(
                "{} > 1 is not implemented",
                key(suffix)
            )));
        }
    }
    Ok(())
}
