//! The fields of a Hugging Face `config.json` that ferrite reads, and the generic readings a
//! family (`crate::arch::families`) composes into its `ModelConfig`: the checks every family
//! shares, the activation, per-layer windows, RoPE (`rope_config`), experts (`moe_config`).
//! Both layouts are read: the legacy one of the hub's checkpoints (`rope_theta`,
//! `rope_scaling`, `rope_local_base_freq`) and the one transformers 5 writes
//! (`rope_parameters`). A field that changes the math and is not implemented is an error
//! naming it, never ignored.

use serde::Deserialize;

use super::gemma4_fields::Gemma4Fields;
use super::linear_config::{linear_attention_of, LinearFields};
use super::moe_config::{moe_of, MoeConvention, MoeFields};
use super::rope_config::{per_type_entry, rope_of, LayerRope, Rope, RopeDefaults, RopeFields};
use super::HfError;
use crate::config::{
    Activation, Arch, BlockVariant, LayerAttention, LinearAttention, ModelConfig, MoeConfig,
    RopeStyle,
};

#[derive(Debug, Deserialize)]
pub struct HfConfig {
    pub architectures: Option<Vec<String>>,
    pub model_type: Option<String>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    /// The dense MLPs' width (absent from a config whose MLPs are all experts: 0).
    #[serde(default)]
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    #[serde(flatten)]
    rope: RopeFields,
    #[serde(flatten)]
    moe: MoeFields,
    #[serde(flatten)]
    linear: LinearFields,
    #[serde(flatten)]
    pub gemma4: Gemma4Fields,
    /// The query projection also yields an output gate (qwen3_5; qwen3_next always has it).
    pub attn_output_gate: Option<bool>,
    /// qwen2's switch for the Q/K/V biases (default on).
    pub qkv_bias: Option<bool>,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: Option<bool>,
    pub attention_bias: Option<bool>,
    pub mlp_bias: Option<bool>,
    pub hidden_act: Option<String>,
    /// gemma's name for `hidden_act`.
    pub hidden_activation: Option<String>,
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
    pub max_window_layers: Option<usize>,
    pub layer_types: Option<Vec<String>>,
    #[serde(alias = "_sliding_window_pattern")]
    pub sliding_window_pattern: Option<usize>,
    pub query_pre_attn_scalar: Option<f64>,
    pub attn_logit_softcapping: Option<f64>,
    pub final_logit_softcapping: Option<f64>,
    /// gpt-oss's clamped SwiGLU constants.
    pub swiglu_alpha: Option<f64>,
    pub swiglu_limit: Option<f64>,
}

/// What a family decides about its config; [`HfConfig::model_config`] adds the sizes every
/// family reads the same way.
pub struct HfTranslation {
    pub arch: Arch,
    pub rope: Rope,
    /// One entry per layer: `Some(window)` for sliding-window attention.
    pub windows: Vec<Option<usize>>,
    pub block: BlockVariant,
    pub rope_style: RopeStyle,
    /// `tie_word_embeddings` when the config does not say (transformers: false, gemma3: true).
    pub tied_by_default: bool,
    pub qkv_bias: bool,
    pub moe: Option<MoeConfig>,
    pub linear_attention: Option<LinearAttention>,
}

fn unsupported(field: &str, value: impl std::fmt::Display, why: &str) -> HfError {
    HfError::Unsupported(format!("`{field}` = {value}: {why}"))
}

impl HfConfig {
    /// The fields of a `config.json`. A composite (multimodal) config keeps its language
    /// model's fields under `text_config` (qwen3_5, gemma3's 4B and up): they are read from
    /// there, under the composite's `architectures` and `model_type`.
    pub fn parse(text: &str) -> Result<HfConfig, HfError> {
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(HfError::Config)?;
        let nested = value
            .get("text_config")
            .filter(|_| value.get("vocab_size").is_none())
            .and_then(serde_json::Value::as_object)
            .cloned();
        if let (Some(text_config), Some(top)) = (nested, value.as_object_mut()) {
            for (key, field) in text_config {
                if key != "model_type" && key != "architectures" {
                    top.insert(key, field);
                }
            }
        }
        serde_json::from_value(value).map_err(HfError::Config)
    }

    /// The linear-attention layers of a hybrid, `None` when the config has none.
    pub fn linear_attention(&self) -> Result<Option<LinearAttention>, HfError> {
        linear_attention_of(
            &self.linear,
            self.layer_types.as_deref(),
            self.num_hidden_layers,
        )
    }

    /// Refuses the fields that would change the math in ways ferrite does not implement;
    /// `attention_bias` is allowed only where the family implements the biases.
    pub fn check_implemented(&self, attention_bias_allowed: bool) -> Result<(), HfError> {
        if !attention_bias_allowed && self.attention_bias == Some(true) {
            return Err(unsupported(
                "attention_bias",
                true,
                "attention projection biases are implemented for qwen2 only",
            ));
        }
        if self.mlp_bias == Some(true) {
            return Err(unsupported(
                "mlp_bias",
                true,
                "MLP biases are not implemented",
            ));
        }
        for (field, value) in [
            ("attn_logit_softcapping", self.attn_logit_softcapping),
            ("final_logit_softcapping", self.final_logit_softcapping),
        ] {
            if let Some(v) = value {
                return Err(unsupported(
                    field,
                    v,
                    "logit softcapping is not implemented",
                ));
            }
        }
        if self.num_attention_heads == 0 {
            return Err(unsupported("num_attention_heads", 0, "no attention heads"));
        }
        Ok(())
    }

    /// `head_dim`, or the hidden size split over the heads.
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// The MLP's activation from `hidden_act`, or from gemma's `hidden_activation` first when
    /// `gemma_field`; `default` when neither is given.
    pub fn activation(
        &self,
        default: Activation,
        gemma_field: bool,
    ) -> Result<Activation, HfError> {
        let (field, name) = match (&self.hidden_activation, &self.hidden_act) {
            (Some(name), _) if gemma_field => ("hidden_activation", name.as_str()),
            (_, Some(name)) => ("hidden_act", name.as_str()),
            _ => return Ok(default),
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

    /// The window of each layer: `layer_types` when the config has it, else `window` on the
    /// layers `slides` picks (the family's own pattern).
    pub fn layer_windows(
        &self,
        window: Option<usize>,
        slides: impl Fn(usize) -> bool,
    ) -> Result<Vec<Option<usize>>, HfError> {
        let layers = self.num_hidden_layers;
        if window == Some(0) {
            return Err(unsupported(
                "sliding_window",
                0,
                "a window must hold at least one token",
            ));
        }
        let Some(types) = &self.layer_types else {
            return Ok((0..layers).map(|i| window.filter(|_| slides(i))).collect());
        };
        if types.len() != layers {
            return Err(unsupported(
                "layer_types",
                format!("{} entries", types.len()),
                "needs one per layer",
            ));
        }
        types
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
            .collect()
    }

    /// The RoPE of full-attention and sliding layers, with the family's defaults.
    pub fn rope(&self, defaults: RopeDefaults) -> Result<Rope, HfError> {
        rope_of(&self.rope, defaults)
    }

    /// The `rope_parameters` entry of layer type `kind`, if the config has one per type.
    pub fn rope_entry(&self, kind: &str) -> Option<&serde_json::Value> {
        per_type_entry(&self.rope, kind)
    }

    /// The mixture of experts under the family's convention; `None` for a config without
    /// experts.
    pub fn moe(&self, convention: &MoeConvention) -> Result<Option<MoeConfig>, HfError> {
        moe_of(
            &self.moe,
            convention,
            self.num_hidden_layers,
            self.intermediate_size,
        )
    }

    /// The `ModelConfig` of the family's decisions and the config's sizes.
    pub fn model_config(&self, t: HfTranslation) -> ModelConfig {
        let layer_attention: Vec<LayerAttention> = t
            .windows
            .iter()
            .map(|&sliding_window| {
                let LayerRope { theta, scaled } = match sliding_window {
                    Some(_) => t.rope.sliding,
                    None => t.rope.full,
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
            rope_theta: t.rope.full.theta,
            rope_scaled: true,
        };
        // The contract's empty list: every layer full attention with `rope_theta`.
        let layer_attention = if layer_attention.iter().all(|a| *a == uniform) {
            Vec::new()
        } else {
            layer_attention
        };
        ModelConfig {
            arch: t.arch,
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_hidden_layers,
            num_heads: self.num_attention_heads,
            num_kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim: self.head_dim(),
            rope_theta: t.rope.full.theta,
            rope_style: t.rope_style,
            rms_norm_eps: self.rms_norm_eps as f32,
            max_position_embeddings: self.max_position_embeddings,
            tie_word_embeddings: self.tie_word_embeddings.unwrap_or(t.tied_by_default),
            qkv_bias: t.qkv_bias,
            block: t.block,
            rope_scaling: t.rope.scaling,
            layer_attention,
            moe: t.moe,
            linear_attention: t.linear_attention,
        }
    }
}
