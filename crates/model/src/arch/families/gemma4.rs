//! Gemma 4 (text): Gemma 3's block (post norms, GeGLU, scaled embeddings, Q/K norms) with
//! plain `w` RMSNorms, a weightless norm on V and unscaled scores; sliding layers and global
//! ones with a wider head (`global_head_dim`), "proportional" RoPE and, with
//! `attention_k_eq_v`, values that are the keys' projection and KV heads of their own; per-layer
//! inputs (PLE); the last `num_kv_shared_layers` layers reading an earlier layer's K/V (twice
//! as wide MLPs with `use_double_wide_mlp`); a learned scalar per layer; softcapped logits; and
//! (26B-A4B) a mixture of experts beside every layer's dense MLP.
//!
//! The hub's checkpoints are `Gemma4ForConditionalGeneration` (model_type `gemma4`, the text
//! model in `text_config`, its weights under `model.language_model.`, vision and audio towers
//! beside it that the text model does not read); `Gemma4ForCausalLM` (`gemma4_text`) is the
//! text model alone. Both read the same. Bidirectional attention (`use_bidirectional_attention:
//! all`) is refused; `vision` changes nothing for text.

use crate::arch::rows::split_gate_up;
use crate::arch::Family;
use crate::config::{
    Activation, Arch, BlockVariant, GlobalAttention, ModelConfig, PerLayerInput, RopeStyle,
};
use crate::hf::{self, HfConfig, HfError, HfTranslation, MoeConvention, RopeDefaults};
use crate::tensor_names::{
    LayerTensor, PER_LAYER_MODEL_PROJ, PER_LAYER_PROJ_NORM, PER_LAYER_TOKEN_EMBD,
};
use crate::weights::ModelWeights;

pub(super) const FAMILIES: &[&dyn Family] = &[&TEXT, &COMPOSITE];

/// transformers' Gemma4TextConfig defaults.
const DEFAULT_WINDOW: usize = 512;
const DEFAULT_PATTERN: usize = 6;
const DEFAULT_GLOBAL_HEAD_DIM: usize = 512;
const DEFAULT_PER_LAYER_WIDTH: usize = 256;
const DEFAULT_PER_LAYER_VOCAB: usize = 262_144;
/// Global layers' RoPE when `rope_parameters` does not say: proportional over a quarter.
const DEFAULT_GLOBAL_ROTARY: f64 = 0.25;
const DEFAULT_ROPE: RopeDefaults = RopeDefaults {
    theta: 1_000_000.0,
    local_theta: Some(10_000.0),
    partial_rotary: None,
    proportional: true,
};
/// The experts: `moe_intermediate_size` wide, on every layer, top-k always renormalised.
const EXPERTS: MoeConvention = MoeConvention {
    own_expert_width: true,
    sparse_step: false,
    shared_expert: false,
    always_renormalise: true,
};
/// The name `hf_tensor_name` gives the stacked gate/up experts, split by `hf_finish`.
const GATE_UP_EXPS: &str = "ffn_gate_up_exps.weight";

/// The two classes that hold a Gemma 4 text model.
pub struct Gemma4 {
    hf_class: &'static str,
    hf_model_type: &'static str,
}

const TEXT: Gemma4 = Gemma4 {
    hf_class: "Gemma4ForCausalLM",
    hf_model_type: "gemma4_text",
};

const COMPOSITE: Gemma4 = Gemma4 {
    hf_class: "Gemma4ForConditionalGeneration",
    hf_model_type: "gemma4",
};

impl Family for Gemma4 {
    fn hf_class(&self) -> Option<&'static str> {
        Some(self.hf_class)
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some(self.hf_model_type)
    }
    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        gemma4_config(c)
    }
    fn hf_tensor_name(&self, hf: &str) -> Option<String> {
        tensor_name(hf)
    }
    fn hf_finish(&self, config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), HfError> {
        for layer in 0..config.num_layers {
            if let Some(gate_up) = weights.tensors.remove(&format!("blk.{layer}.{GATE_UP_EXPS}")) {
                split_gate_up(layer, &gate_up, weights)?;
            }
        }
        Ok(())
    }
}

fn unsupported(field: &str, value: impl std::fmt::Display, why: &str) -> HfError {
    HfError::Unsupported(format!("`{field}` = {value}: {why}"))
}

fn gemma4_config(c: &HfConfig) -> Result<ModelConfig, HfError> {
    let g = &c.gemma4;
    if c.attention_bias == Some(true) || c.mlp_bias == Some(true) {
        return Err(unsupported("attention_bias / mlp_bias", true, "Gemma 4 has no biases"));
    }
    if let Some(v) = c.attn_logit_softcapping {
        return Err(unsupported("attn_logit_softcapping", v, "not implemented"));
    }
    if let Some(mode) = g.use_bidirectional_attention.as_ref().and_then(|v| v.as_str()) {
        if mode == "all" {
            return Err(unsupported(
                "use_bidirectional_attention",
                mode,
                "only causal attention is implemented",
            ));
        }
    }
    let rope = c.rope(DEFAULT_ROPE)?;
    let window = Some(c.sliding_window.unwrap_or(DEFAULT_WINDOW));
    let mut windows = c.layer_windows(window, |l| (l + 1) % DEFAULT_PATTERN != 0)?;
    // transformers forces the last layer to full attention.
    if let Some(last) = windows.last_mut() {
        *last = None;
    }
    let keys_are_values = g.attention_k_eq_v.unwrap_or(false);
    let kv_heads = c.num_key_value_heads.unwrap_or(c.num_attention_heads);
    let (global_head_dim, global_kv_heads) = match &g.per_layer_config {
        Some(overrides) => global_overrides(c, overrides, &windows)?,
        None => (
            g.global_head_dim.unwrap_or(DEFAULT_GLOBAL_HEAD_DIM),
            match keys_are_values {
                true => g.num_global_key_value_heads.unwrap_or(kv_heads),
                false => kv_heads,
            },
        ),
    };
    let global = GlobalAttention {
        head_dim: global_head_dim,
        num_kv_heads: global_kv_heads,
        values_are_keys: keys_are_values,
        rope_pairs: global_rope_pairs(c, global_head_dim)?,
    };
    let per_layer_width = g
        .hidden_size_per_layer_input
        .unwrap_or(DEFAULT_PER_LAYER_WIDTH);
    let per_layer_input = (per_layer_width > 0).then(|| PerLayerInput {
        width: per_layer_width,
        vocab_size: g.vocab_size_per_layer_input.unwrap_or(DEFAULT_PER_LAYER_VOCAB),
    });
    let moe = match g.enable_moe_block.unwrap_or(false) {
        false => None,
        true => Some(c.moe(&EXPERTS)?.ok_or_else(|| {
            unsupported("enable_moe_block", true, "without `num_experts`")
        })?),
    };
    let block = BlockVariant {
        qk_norm: true,
        norm_weight_offset: 0.0,
        post_norms: true,
        activation: c.activation(Activation::GeluTanh, true)?,
        embedding_scale: (c.hidden_size as f32).sqrt(),
        attn_scale: 1.0,
        global_attention: Some(global),
        v_norm: true,
        kv_shared_layers: g.num_kv_shared_layers.unwrap_or(0),
        wide_mlp_on_shared_layers: g.use_double_wide_mlp.unwrap_or(false),
        per_layer_input,
        layer_output_scale: true,
        final_logit_softcap: c.final_logit_softcapping.map(|v| v as f32),
        experts_beside_mlp: true,
        ..BlockVariant::llama(c.head_dim())
    };
    Ok(c.model_config(HfTranslation {
        arch: Arch::Gemma4,
        rope,
        windows,
        block,
        rope_style: RopeStyle::Halves,
        tied_by_default: true,
        qkv_bias: false,
        moe,
        linear_attention: None,
    }))
}

/// The global layers' head size and KV heads from transformers 5's `per_layer_config`
/// (layer index -> `head_dim`, `num_key_value_heads`): the same on every full-attention layer
/// and none on a sliding one, as transformers writes them; anything else is refused.
fn global_overrides(
    c: &HfConfig,
    overrides: &serde_json::Map<String, serde_json::Value>,
    windows: &[Option<usize>],
) -> Result<(usize, usize), HfError> {
    let field = "per_layer_config";
    let base = (c.head_dim(), c.num_key_value_heads.unwrap_or(c.num_attention_heads));
    let mut global = None;
    for (layer, window) in windows.iter().enumerate() {
        let entry = overrides.get(&layer.to_string());
        let read = |key: &str, default: usize| {
            entry
                .and_then(|e| e.get(key))
                .and_then(serde_json::Value::as_u64)
                .map_or(default, |v| v as usize)
        };
        let shape = (read("head_dim", base.0), read("num_key_value_heads", base.1));
        match window {
            Some(_) if shape != base => {
                return Err(unsupported(field, layer, "a sliding layer with its own head shape"))
            }
            Some(_) => {}
            None if global.is_some_and(|g| g != shape) => {
                return Err(unsupported(field, layer, "global layers of different head shapes"))
            }
            None => global = Some(shape),
        }
    }
    Ok(global.unwrap_or(base))
}

/// Frequency pairs a global layer turns: transformers' `int(partial_rotary_factor * head_dim
/// // 2)` for `proportional` RoPE, all of them for `default`.
fn global_rope_pairs(c: &HfConfig, head_dim: usize) -> Result<usize, HfError> {
    let entry = c.rope_entry("full_attention");
    let kind = entry.and_then(|e| e.get("rope_type")).and_then(|t| t.as_str());
    let factor = match (entry, kind) {
        (None, _) => DEFAULT_GLOBAL_ROTARY,
        (Some(_), Some("default") | None) => 1.0,
        (Some(e), Some(_)) => e
            .get("partial_rotary_factor")
            .and_then(|f| f.as_f64())
            .unwrap_or(1.0),
    };
    if !(0.0..=1.0).contains(&factor) {
        return Err(unsupported(
            "rope_parameters.full_attention.partial_rotary_factor",
            factor,
            "must be in [0, 1]",
        ));
    }
    Ok((factor * head_dim as f64 / 2.0).floor() as usize)
}

/// Canonical names: the composite's `model.language_model.` read as the text model's
/// `model.`; Gemma 4's own modules; the vision and audio towers left out.
fn tensor_name(hf: &str) -> Option<String> {
    let plain = match hf.strip_prefix("model.language_model.") {
        Some(rest) => format!("model.{rest}"),
        None if hf.starts_with("model.") || hf == "lm_head.weight" => hf.to_string(),
        None => return None,
    };
    match plain.as_str() {
        "model.embed_tokens_per_layer.weight" => return Some(PER_LAYER_TOKEN_EMBD.into()),
        "model.per_layer_model_projection.weight" => return Some(PER_LAYER_MODEL_PROJ.into()),
        "model.per_layer_projection_norm.weight" => return Some(PER_LAYER_PROJ_NORM.into()),
        _ => {}
    }
    let Some((layer, module)) = hf::layer_module(&plain) else {
        return hf::canonical_name(&plain);
    };
    let tensor = match module {
        "post_attention_layernorm.weight" => LayerTensor::PostAttentionNorm,
        "per_layer_input_gate.weight" => LayerTensor::PerLayerInpGate,
        "per_layer_projection.weight" => LayerTensor::PerLayerProj,
        "post_per_layer_input_norm.weight" => LayerTensor::PerLayerPostNorm,
        "layer_scalar" => LayerTensor::LayerOutputScale,
        "router.proj.weight" => LayerTensor::FfnGateInp,
        "router.scale" => LayerTensor::FfnGateInpScale,
        "router.per_expert_scale" => LayerTensor::FfnDownExpsScale,
        "experts.down_proj" => LayerTensor::FfnDownExps,
        "pre_feedforward_layernorm_2.weight" => LayerTensor::FfnPreNorm2,
        "post_feedforward_layernorm_1.weight" => LayerTensor::FfnPostNorm1,
        "post_feedforward_layernorm_2.weight" => LayerTensor::FfnPostNorm2,
        "experts.gate_up_proj" => return Some(format!("blk.{layer}.{GATE_UP_EXPS}")),
        _ => return hf::canonical_name(&plain),
    };
    Some(tensor.of(layer))
}
