//! `ModelConfig` from a Hugging Face `config.json`: LlamaForCausalLM, Qwen2ForCausalLM,
//! Qwen3ForCausalLM, MistralForCausalLM, Gemma3ForCausalLM and the mixtures of experts
//! Qwen3MoeForCausalLM, Qwen2MoeForCausalLM and MixtralForCausalLM (see `moe_config`), in the legacy layout the hub's
//! checkpoints have (`rope_theta`, `rope_scaling`, `rope_local_base_freq`) and in the one
//! transformers 5 writes (`rope_parameters`, per layer type for gemma3). A field that changes
//! the math and is not implemented is an error naming it, never ignored.

use serde::Deserialize;

use super::moe_config::{moe_of, MoeFamily, MoeFields};
use super::rope_config::{rope_of, LayerRope, RopeFields};
use super::HfError;
use crate::config::{Activation, Arch, BlockVariant, LayerAttention, ModelConfig, RopeStyle};

/// What transformers' configs default `sliding_window` to for gemma3.
const GEMMA3_DEFAULT_WINDOW: usize = 4096;
/// Gemma3's default `sliding_window_pattern`: every 6th layer is global.
const GEMMA3_DEFAULT_PATTERN: usize = 6;
/// Gemma3's default `query_pre_attn_scalar`.
const GEMMA3_DEFAULT_QUERY_SCALAR: f64 = 256.0;

#[derive(Debug, Deserialize)]
struct RawConfig {
    architectures: Option<Vec<String>>,
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    #[serde(flatten)]
    rope: RopeFields,
    #[serde(flatten)]
    moe: MoeFields,
    /// qwen2_moe's switch for the Q/K/V biases (default on).
    qkv_bias: Option<bool>,
    rms_norm_eps: f64,
    max_position_embeddings: usize,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    hidden_act: Option<String>,
    /// gemma's name for `hidden_act`.
    hidden_activation: Option<String>,
    sliding_window: Option<usize>,
    use_sliding_window: Option<bool>,
    max_window_layers: Option<usize>,
    layer_types: Option<Vec<String>>,
    #[serde(alias = "_sliding_window_pattern")]
    sliding_window_pattern: Option<usize>,
    query_pre_attn_scalar: Option<f64>,
    attn_logit_softcapping: Option<f64>,
    final_logit_softcapping: Option<f64>,
}

/// The attention family of a config, and its MoE convention when it has experts.
fn arch_of(raw: &RawConfig) -> Result<(Arch, Option<MoeFamily>), HfError> {
    let named = |a: &str| raw.architectures.iter().flatten().any(|x| x == a);
    let model_type = raw.model_type.as_deref();
    let known = [
        ("LlamaForCausalLM", "llama", Arch::Llama, None),
        ("Qwen2ForCausalLM", "qwen2", Arch::Qwen2, None),
        ("Qwen3ForCausalLM", "qwen3", Arch::Qwen3, None),
        ("MistralForCausalLM", "mistral", Arch::Mistral, None),
        ("Gemma3ForCausalLM", "gemma3_text", Arch::Gemma3, None),
        (
            "Qwen3MoeForCausalLM",
            "qwen3_moe",
            Arch::Qwen3,
            Some(MoeFamily::Qwen3Moe),
        ),
        (
            "Qwen2MoeForCausalLM",
            "qwen2_moe",
            Arch::Qwen2,
            Some(MoeFamily::Qwen2Moe),
        ),
        (
            "MixtralForCausalLM",
            "mixtral",
            Arch::Mistral,
            Some(MoeFamily::Mixtral),
        ),
    ];
    known
        .iter()
        .find(|(class, kind, _, _)| named(class) || model_type == Some(kind))
        .map(|&(_, _, arch, moe)| (arch, moe))
        .ok_or_else(|| {
            let names = raw.architectures.as_deref().unwrap_or_default().join(", ");
            HfError::UnsupportedArch(format!(
                "{} (model_type {})",
                if names.is_empty() { "unnamed" } else { &names },
                model_type.unwrap_or("not given")
            ))
        })
}

fn unsupported(field: &str, value: impl std::fmt::Display, why: &str) -> HfError {
    HfError::Unsupported(format!("`{field}` = {value}: {why}"))
}

/// Refuses the fields that would change the math in ways ferrite does not implement.
fn check_unimplemented(raw: &RawConfig, arch: Arch) -> Result<(), HfError> {
    if arch != Arch::Qwen2 && raw.attention_bias == Some(true) {
        return Err(unsupported(
            "attention_bias",
            true,
            "attention projection biases are implemented for qwen2 only",
        ));
    }
    if raw.mlp_bias == Some(true) {
        return Err(unsupported(
            "mlp_bias",
            true,
            "MLP biases are not implemented",
        ));
    }
    for (field, value) in [
        ("attn_logit_softcapping", raw.attn_logit_softcapping),
        ("final_logit_softcapping", raw.final_logit_softcapping),
    ] {
        if let Some(v) = value {
            return Err(unsupported(
                field,
                v,
                "logit softcapping is not implemented",
            ));
        }
    }
    if raw.num_attention_heads == 0 {
        return Err(unsupported("num_attention_heads", 0, "no attention heads"));
    }
    Ok(())
}

fn activation_of(raw: &RawConfig, arch: Arch) -> Result<Activation, HfError> {
    let (field, name) = match (&raw.hidden_activation, &raw.hidden_act) {
        (Some(name), _) if arch == Arch::Gemma3 => ("hidden_activation", name.as_str()),
        (_, Some(name)) => ("hidden_act", name.as_str()),
        _ if arch == Arch::Gemma3 => return Ok(Activation::GeluTanh),
        _ => return Ok(Activation::Silu),
    };
    match name {
        "silu" | "swish" => Ok(Activation::Silu),
        "gelu_pytorch_tanh" | "gelu_tanh" => Ok(Activation::GeluTanh),
        other => Err(unsupported(
            field,
            other,
            "this activation is not implemented",
        )),
    }
}

/// Which layers use sliding-window attention (`Some(window)`), as transformers decides.
fn windows_of(raw: &RawConfig, arch: Arch) -> Result<Vec<Option<usize>>, HfError> {
    let layers = raw.num_hidden_layers;
    let window = match arch {
        // Qwen2/3 configs carry a `sliding_window` that only applies with use_sliding_window.
        Arch::Qwen2 | Arch::Qwen3 if raw.use_sliding_window != Some(true) => None,
        Arch::Gemma3 => Some(raw.sliding_window.unwrap_or(GEMMA3_DEFAULT_WINDOW)),
        Arch::Llama => None,
        _ => raw.sliding_window,
    };
    if window == Some(0) {
        return Err(unsupported(
            "sliding_window",
            0,
            "a window must hold at least one token",
        ));
    }
    if let Some(types) = &raw.layer_types {
        if types.len() != layers {
            return Err(unsupported(
                "layer_types",
                format!("{} entries", types.len()),
                "needs one per layer",
            ));
        }
        return types
            .iter()
            .map(|t| match (t.as_str(), window) {
                ("full_attention", _) => Ok(None),
                ("sliding_attention", Some(w)) => Ok(Some(w)),
                ("sliding_attention", None) => Err(unsupported(
                    "layer_types",
                    "sliding_attention",
                    "with no sliding_window in effect",
                )),
                (other, _) => Err(unsupported("layer_types", other, "unknown layer type")),
            })
            .collect();
    }
    Ok((0..layers)
        .map(|i| match arch {
            Arch::Gemma3 => {
                let pattern = raw.sliding_window_pattern.unwrap_or(GEMMA3_DEFAULT_PATTERN);
                window.filter(|_| (i + 1) % pattern.max(1) != 0)
            }
            Arch::Qwen2 | Arch::Qwen3 => {
                window.filter(|_| i >= raw.max_window_layers.unwrap_or(layers))
            }
            _ => window,
        })
        .collect())
}

pub fn config_from_json(text: &str) -> Result<ModelConfig, HfError> {
    let raw: RawConfig = serde_json::from_str(text).map_err(HfError::Config)?;
    let (arch, moe_family) = arch_of(&raw)?;
    check_unimplemented(&raw, arch)?;
    let rope = rope_of(&raw.rope, arch)?;
    let windows = windows_of(&raw, arch)?;
    let head_dim = raw
        .head_dim
        .unwrap_or(raw.hidden_size / raw.num_attention_heads);

    let layer_attention: Vec<LayerAttention> = windows
        .iter()
        .map(|&sliding_window| {
            let LayerRope { theta, scaled } = match sliding_window {
                Some(_) => rope.sliding,
                None => rope.full,
            };
            LayerAttention {
                sliding_window,
                rope_theta: theta,
                rope_scaled: scaled,
            }
        })
        .collect();
    let uniform = LayerAttention {
        sliding_window: None,
        rope_theta: rope.full.theta,
        rope_scaled: true,
    };
    // The contract's empty list: every layer full attention with `rope_theta`.
    let layer_attention = if layer_attention.iter().all(|a| *a == uniform) {
        Vec::new()
    } else {
        layer_attention
    };

    let mut block = BlockVariant::llama(head_dim);
    block.activation = activation_of(&raw, arch)?;
    match arch {
        Arch::Qwen3 => block.qk_norm = true,
        Arch::Gemma3 => {
            block.qk_norm = true;
            block.norm_weight_offset = 1.0;
            block.post_norms = true;
            block.embedding_scale = (raw.hidden_size as f32).sqrt();
            let scalar = raw
                .query_pre_attn_scalar
                .unwrap_or(GEMMA3_DEFAULT_QUERY_SCALAR);
            block.attn_scale = 1.0 / (scalar as f32).sqrt();
        }
        _ => {}
    }

    Ok(ModelConfig {
        arch,
        vocab_size: raw.vocab_size,
        hidden_size: raw.hidden_size,
        intermediate_size: raw.intermediate_size,
        num_layers: raw.num_hidden_layers,
        num_heads: raw.num_attention_heads,
        num_kv_heads: raw.num_key_value_heads.unwrap_or(raw.num_attention_heads),
        head_dim,
        rope_theta: rope.full.theta,
        // Llama Q/K rows are permuted into the interleaved layout at load (see `permute`), so
        // every llama runs interleaved whatever file it came from.
        rope_style: match arch {
            Arch::Llama => RopeStyle::Interleaved,
            _ => RopeStyle::Halves,
        },
        rms_norm_eps: raw.rms_norm_eps as f32,
        max_position_embeddings: raw.max_position_embeddings,
        // transformers' configs default to untied, except gemma3's.
        tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(arch == Arch::Gemma3),
        qkv_bias: arch == Arch::Qwen2 && raw.qkv_bias != Some(false),
        block,
        rope_scaling: rope.scaling,
        layer_attention,
        moe: match moe_family {
            Some(family) => moe_of(
                &raw.moe,
                family,
                raw.num_hidden_layers,
                raw.intermediate_size,
            )?,
            None => None,
        },
    })
}

#[cfg(test)]
mod tests;
