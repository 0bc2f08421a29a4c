//! `ModelConfig` from a Hugging Face `config.json` (LlamaForCausalLM, Qwen2ForCausalLM).

use serde::Deserialize;
use serde_json::Value;

use super::HfError;
use crate::config::{Arch, BlockVariant, ModelConfig, RopeStyle};

const DEFAULT_ROPE_THETA: f64 = 10_000.0;

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
    rope_theta: Option<f64>,
    /// transformers >= 5 groups `rope_theta` and the scaling in here.
    rope_parameters: Option<Value>,
    rope_scaling: Option<Value>,
    rms_norm_eps: f64,
    max_position_embeddings: usize,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
}

fn arch_of(raw: &RawConfig) -> Result<Arch, HfError> {
    let named = |a: &str| raw.architectures.iter().flatten().any(|x| x == a);
    if named("LlamaForCausalLM") || raw.model_type.as_deref() == Some("llama") {
        Ok(Arch::Llama)
    } else if named("Qwen2ForCausalLM") || raw.model_type.as_deref() == Some("qwen2") {
        Ok(Arch::Qwen2)
    } else {
        let names = raw.architectures.as_deref().unwrap_or_default().join(", ");
        Err(HfError::UnsupportedArch(format!(
            "{} (model_type {})",
            if names.is_empty() { "unnamed" } else { &names },
            raw.model_type.as_deref().unwrap_or("not given")
        )))
    }
}

/// RoPE scaling changes the frequencies; ferrite implements plain RoPE only, so anything but
/// the default is refused rather than silently run wrong.
fn check_rope_type(value: Option<&Value>) -> Result<(), HfError> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let kind = v
        .get("rope_type")
        .or_else(|| v.get("type"))
        .and_then(Value::as_str);
    match kind {
        None | Some("default") => Ok(()),
        Some(other) => Err(HfError::Unsupported(format!(
            "rope scaling `{other}` ({v})"
        ))),
    }
}

pub fn config_from_json(text: &str) -> Result<ModelConfig, HfError> {
    let raw: RawConfig = serde_json::from_str(text).map_err(HfError::Config)?;
    let arch = arch_of(&raw)?;
    check_rope_type(raw.rope_scaling.as_ref())?;
    check_rope_type(raw.rope_parameters.as_ref())?;
    if arch == Arch::Llama && raw.attention_bias == Some(true) {
        return Err(HfError::Unsupported(
            "llama with attention_bias".to_string(),
        ));
    }
    if raw.num_attention_heads == 0 {
        return Err(HfError::Unsupported("num_attention_heads = 0".to_string()));
    }
    let rope_theta = raw
        .rope_theta
        .or_else(|| {
            raw.rope_parameters
                .as_ref()
                .and_then(|p| p.get("rope_theta"))
                .and_then(Value::as_f64)
        })
        .unwrap_or(DEFAULT_ROPE_THETA);
    let head_dim = raw
        .head_dim
        .unwrap_or(raw.hidden_size / raw.num_attention_heads);
    Ok(ModelConfig {
        arch,
        vocab_size: raw.vocab_size,
        hidden_size: raw.hidden_size,
        intermediate_size: raw.intermediate_size,
        num_layers: raw.num_hidden_layers,
        num_heads: raw.num_attention_heads,
        num_kv_heads: raw.num_key_value_heads.unwrap_or(raw.num_attention_heads),
        head_dim,
        rope_theta: rope_theta as f32,
        // Llama Q/K rows are permuted into the interleaved layout at load (see `permute`), so
        // every llama runs interleaved whatever file it came from.
        rope_style: match arch {
            Arch::Llama => RopeStyle::Interleaved,
            _ => RopeStyle::Halves,
        },
        rms_norm_eps: raw.rms_norm_eps as f32,
        max_position_embeddings: raw.max_position_embeddings,
        // Both LlamaConfig and Qwen2Config default to untied.
        tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
        qkv_bias: arch == Arch::Qwen2,
        block: BlockVariant::llama(head_dim),
        rope_scaling: None,
        layer_attention: Vec::new(),
    })
}
