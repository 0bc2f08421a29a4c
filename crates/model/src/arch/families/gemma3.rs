//! Gemma 3 (text): `(1 + w)` RMSNorms, also around the attention and MLP outputs
//! (post-norms), GeGLU with tanh GELU, embeddings scaled by sqrt(hidden), Q/K norms, scores
//! scaled by `query_pre_attn_scalar^-0.5`; every sixth layer global, the others sliding with a
//! rope base of their own; tied embeddings by default.

use crate::arch::Family;
use crate::config::{Activation, Arch, BlockVariant, LayerAttention, ModelConfig, RopeStyle};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{layer_tensor, HfConfig, HfError, HfTranslation, RopeDefaults};

pub(super) const FAMILIES: &[&dyn Family] = &[&Gemma3];

/// transformers' Gemma3TextConfig defaults.
const DEFAULT_WINDOW: usize = 4096;
/// Every `DEFAULT_PATTERN`th layer is global (`sliding_window_pattern`).
const DEFAULT_PATTERN: usize = 6;
const DEFAULT_QUERY_SCALAR: f64 = 256.0;
/// Global layers' rope base, and sliding (local) layers' (`rope_local_base_freq`).
const DEFAULT_ROPE: RopeDefaults = RopeDefaults {
    theta: 1_000_000.0,
    local_theta: Some(10_000.0),
    partial_rotary: None,
    proportional: false,
};
/// llama.cpp's Gemma 3: the sliding layers' rope base, not stored in its files.
const GGUF_LOCAL_ROPE_THETA: f32 = 10_000.0;

pub struct Gemma3;

impl Family for Gemma3 {
    fn hf_class(&self) -> Option<&'static str> {
        Some("Gemma3ForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("gemma3_text")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["gemma3"]
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(false)?;
        let rope = c.rope(DEFAULT_ROPE)?;
        let window = Some(c.sliding_window.unwrap_or(DEFAULT_WINDOW));
        let pattern = c.sliding_window_pattern.unwrap_or(DEFAULT_PATTERN).max(1);
        let windows = c.layer_windows(window, |layer| (layer + 1) % pattern != 0)?;
        let scalar = c.query_pre_attn_scalar.unwrap_or(DEFAULT_QUERY_SCALAR);
        let block = BlockVariant {
            qk_norm: true,
            norm_weight_offset: 1.0,
            post_norms: true,
            activation: c.activation(Activation::GeluTanh, true)?,
            embedding_scale: (c.hidden_size as f32).sqrt(),
            attn_scale: 1.0 / (scalar as f32).sqrt(),
            ..BlockVariant::llama(c.head_dim())
        };
        Ok(c.model_config(HfTranslation {
            arch: Arch::Gemma3,
            rope,
            windows,
            block,
            rope_style: RopeStyle::Halves,
            tied_by_default: true,
            qkv_bias: false,
            moe: None,
            linear_attention: None,
        }))
    }

    /// llama.cpp's converter stores the norm weights with the 1 of `(1 + w)` already added,
    /// and llama.cpp scores with 1/sqrt(head_dim) (query_pre_attn_scalar is not in the file;
    /// it equals head_dim for every Gemma 3 size but 27B). Every sixth layer is global with the
    /// file's rope base, the others slide over `attention.sliding_window` tokens.
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        let config = g.base(Arch::Gemma3, RopeStyle::Halves, true)?;
        let window = g.meta.usize(&g.key("attention.sliding_window"))?;
        let theta = g.rope_theta()?;
        let layer_attention = (0..config.num_layers)
            .map(|layer| {
                let global = layer % DEFAULT_PATTERN == DEFAULT_PATTERN - 1;
                LayerAttention {
                    sliding_window: (!global).then_some(window),
                    rope_theta: if global { theta } else { GGUF_LOCAL_ROPE_THETA },
                    rope_scaled: global,
                }
            })
            .collect();
        Ok(ModelConfig {
            block: BlockVariant {
                qk_norm: true,
                norm_weight_offset: 0.0,
                post_norms: true,
                activation: Activation::GeluTanh,
                embedding_scale: (config.hidden_size as f32).sqrt(),
                attn_scale: 1.0 / (config.head_dim as f32).sqrt(),
                ..config.block
            },
            layer_attention,
            ..config
        })
    }

    /// Gemma's `post_attention_layernorm` normalises the attention output (llama.cpp's
    /// `post_attention_norm`); its pre-MLP norm is `pre_feedforward_layernorm`.
    fn hf_tensor_name(&self, hf: &str) -> Option<String> {
        match layer_tensor(hf) {
            Some((layer, "post_attention_layernorm", kind)) => {
                Some(format!("blk.{layer}.post_attention_norm.{kind}"))
            }
            _ => crate::hf::canonical_name(hf),
        }
    }
}
