//! The mixture-of-experts part of a Hugging Face `config.json` (`num_experts` or
//! `num_local_experts`, `num_experts_per_tok`, `moe_intermediate_size`, `norm_topk_prob`,
//! `decoder_sparse_step`, `mlp_only_layers`, `shared_expert_intermediate_size`), read under a
//! family's `MoeConvention`.

use serde::Deserialize;

use super::HfError;
use crate::config::MoeConfig;

/// How a family's config describes its experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeConvention {
    /// Experts are `moe_intermediate_size` wide (qwen); else `intermediate_size` (Mixtral).
    pub own_expert_width: bool,
    /// Which layers are sparse: `decoder_sparse_step` and `mlp_only_layers` (qwen); else all.
    pub sparse_step: bool,
    /// A shared expert of `shared_expert_intermediate_size` (qwen2_moe).
    pub shared_expert: bool,
    /// The chosen probabilities are always renormalised (Mixtral); else `norm_topk_prob`,
    /// default false.
    pub always_renormalise: bool,
}

/// transformers' defaults (configuration_qwen2_moe.py / configuration_qwen3_moe.py).
const DEFAULT_SPARSE_STEP: usize = 1;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MoeFields {
    num_experts: Option<usize>,
    /// Mixtral's name for `num_experts` (and the name transformers 5 writes for every family).
    num_local_experts: Option<usize>,
    /// Gemma 4 names it `top_k_experts`.
    #[serde(alias = "top_k_experts")]
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

/// The config's `MoeConfig`, or `None` for a config without experts (transformers then
/// builds dense MLPs everywhere).
pub(super) fn moe_of(
    fields: &MoeFields,
    convention: &MoeConvention,
    num_layers: usize,
    intermediate_size: usize,
) -> Result<Option<MoeConfig>, HfError> {
    // transformers 5 writes every family's expert count as `num_local_experts`.
    let num_experts = fields
        .num_experts
        .or(fields.num_local_experts)
        .ok_or_else(|| missing("num_experts"))?;
    let expert_width = if convention.own_expert_width {
        fields.moe_intermediate_size
    } else {
        Some(intermediate_size)
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
    let sparse_layers = if convention.sparse_step {
        let step = fields.decoder_sparse_step.unwrap_or(DEFAULT_SPARSE_STEP);
        if step == 0 {
            return Err(bad("decoder_sparse_step", 0, "must be at least 1"));
        }
        let dense = fields.mlp_only_layers.as_deref().unwrap_or_default();
        (0..num_layers)
            .map(|i| !dense.contains(&i) && (i + 1) % step == 0)
            .collect()
    } else {
        vec![true; num_layers]
    };
    let shared_expert_intermediate_size = match (
        convention.shared_expert,
        fields.shared_expert_intermediate_size,
    ) {
        (false, _) => None,
        (true, Some(0)) | (true, None) => return Err(missing("shared_expert_intermediate_size")),
        (true, Some(width)) => Some(width),
    };
    Ok(Some(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size,
        norm_topk_prob: convention.always_renormalise || fields.norm_topk_prob.unwrap_or(false),
        shared_expert_intermediate_size,
        sparse_layers,
        biases: false,
    }))
}
