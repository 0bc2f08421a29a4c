//! The mixture-of-experts part of a Hugging Face `config.json`: Qwen3MoeForCausalLM and
//! Qwen2MoeForCausalLM (`num_experts`, `moe_intermediate_size`, `norm_topk_prob`,
//! `decoder_sparse_step`, `mlp_only_layers`, qwen2_moe's shared expert) and MixtralForCausalLM
//! (`num_local_experts`, experts as wide as `intermediate_size`, top-k renormalised).

use serde::Deserialize;

use super::HfError;
use crate::config::MoeConfig;

/// Which MoE convention a config follows (the attention side is the family's `Arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoeFamily {
    Qwen3Moe,
    /// qwen3_moe's router and layer switches, plus a shared expert.
    Qwen2Moe,
    Mixtral,
}

/// transformers' defaults (configuration_qwen2_moe.py / configuration_qwen3_moe.py).
const QWEN_DEFAULT_SPARSE_STEP: usize = 1;

#[derive(Debug, Default, Deserialize)]
pub struct MoeFields {
    num_experts: Option<usize>,
    /// Mixtral's name for `num_experts` (and the name transformers 5 writes for every family).
    num_local_experts: Option<usize>,
    num_experts_per_tok: Option<usize>,
    moe_intermediate_size: Option<usize>,
    norm_topk_prob: Option<bool>,
    shared_expert_intermediate_size: Option<usize>,
    decoder_sparse_step: Option<usize>,
    mlp_only_layers: Option<Vec<usize>>,
}

fn missing(field: &str) -> HfError {
    HfError::Unsupported(format!(
        "`{field}` is missing from a mixture-of-experts config"
    ))
}

fn bad(field: &str, value: impl std::fmt::Display, why: &str) -> HfError {
    HfError::Unsupported(format!("`{field}` = {value}: {why}"))
}

/// The config's `MoeConfig`, or `None` for a Qwen MoE config without experts (transformers
/// then builds dense MLPs everywhere).
pub fn moe_of(
    fields: &MoeFields,
    family: MoeFamily,
    num_layers: usize,
    intermediate_size: usize,
) -> Result<Option<MoeConfig>, HfError> {
    // transformers 5 writes every family's expert count as `num_local_experts`.
    let num_experts = fields
        .num_experts
        .or(fields.num_local_experts)
        .ok_or_else(|| missing("num_experts"))?;
    let expert_width = match family {
        MoeFamily::Qwen3Moe | MoeFamily::Qwen2Moe => fields.moe_intermediate_size,
        MoeFamily::Mixtral => Some(intermediate_size),
    };
    if num_experts == 0 {
        return Ok(None);
    }
    let expert_intermediate_size = expert_width.ok_or_else(|| missing("moe_intermediate_size"))?;
    let experts_per_token = fields
        .num_experts_per_tok
        .ok_or_else(|| missing("num_experts_per_tok"))?;
    if experts_per_token == 0 || experts_per_token > num_experts {
        return Err(bad(
            "num_experts_per_tok",
            experts_per_token,
            "must be between 1 and the number of experts",
        ));
    }
    let sparse_layers = match family {
        MoeFamily::Mixtral => vec![true; num_layers],
        MoeFamily::Qwen3Moe | MoeFamily::Qwen2Moe => {
            let step = fields
                .decoder_sparse_step
                .unwrap_or(QWEN_DEFAULT_SPARSE_STEP);
            if step == 0 {
                return Err(bad("decoder_sparse_step", 0, "must be at least 1"));
            }
            let dense = fields.mlp_only_layers.as_deref().unwrap_or_default();
            (0..num_layers)
                .map(|i| !dense.contains(&i) && (i + 1) % step == 0)
                .collect()
        }
    };
    let shared_expert = family == MoeFamily::Qwen2Moe;
    let shared_expert_intermediate_size =
        match (shared_expert, fields.shared_expert_intermediate_size) {
            (false, _) => None,
            (true, Some(0)) | (true, None) => {
                return Err(missing("shared_expert_intermediate_size"))
            }
            (true, Some(width)) => Some(width),
        };
    Ok(Some(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size,
        // transformers: Mixtral always renormalises; the Qwen configs default to false.
        norm_topk_prob: family == MoeFamily::Mixtral || fields.norm_topk_prob.unwrap_or(false),
        shared_expert_intermediate_size,
        sparse_layers,
    }))
}
