//! The RoPE part of a Hugging Face config: the base and scaling of full-attention and of
//! sliding-window layers, from the legacy fields (`rope_theta`, `rope_scaling`,
//! `rope_local_base_freq`) or transformers >= 5's `rope_parameters` (flat, or one entry per
//! layer type). Scaling other than Llama 3's is refused, naming the field.

use serde::Deserialize;
use serde_json::Value;

use super::HfError;
use crate::config::{Llama3Scaling, RopeScaling, YarnScaling};

/// transformers' `rope_theta` when a config does not give one.
const DEFAULT_ROPE_THETA: f64 = 10_000.0;

/// A family's RoPE conventions.
#[derive(Debug, Clone, Copy)]
pub struct RopeDefaults {
    /// The base when the config gives none.
    pub theta: f64,
    /// `Some(default)`: sliding layers have a base of their own (gemma3's
    /// `rope_local_base_freq`, this when absent) and are never scaled; `None`: they rotate as
    /// full-attention layers do.
    pub local_theta: Option<f64>,
    /// `Some(default)`: the family turns only part of each head (`partial_rotary_factor`,
    /// this when absent: qwen3_next and qwen3_5); `None`: a factor other than 1 is refused.
    pub partial_rotary: Option<f64>,
    /// Whether the family implements Gemma 4's `proportional` rope type (its per-layer
    /// geometry is the family's: `config::GlobalAttention`); refused otherwise.
    pub proportional: bool,
}

impl RopeDefaults {
    /// Every layer one base, transformers' default 10,000.
    pub const PLAIN: RopeDefaults = RopeDefaults {
        theta: DEFAULT_ROPE_THETA,
        local_theta: None,
        partial_rotary: None,
        proportional: false,
    };
}

/// The fields of `config.json` that say how RoPE is done.
#[derive(Debug, Deserialize)]
pub(crate) struct RopeFields {
    rope_theta: Option<f64>,
    /// transformers >= 5 groups `rope_theta` and the scaling in here (per layer type for gemma3).
    rope_parameters: Option<Value>,
    rope_scaling: Option<Value>,
    /// gemma3 (legacy layout): the rope base of sliding layers.
    rope_local_base_freq: Option<f64>,
    /// The share of each head RoPE turns (also read inside `rope_parameters`).
    partial_rotary_factor: Option<f64>,
}

/// One layer type's rope: its base and whether the config's scaling applies.
#[derive(Debug, Clone, Copy)]
pub struct LayerRope {
    pub theta: f32,
    pub scaled: bool,
}

#[derive(Debug)]
pub struct Rope {
    pub full: LayerRope,
    pub sliding: LayerRope,
    pub scaling: Option<RopeScaling>,
    /// The share of each head's dimensions RoPE turns (1: all).
    pub partial_rotary_factor: f64,
}

/// One rope dictionary (`rope_scaling`, `rope_parameters` or one of its per-type entries):
/// its `rope_theta` if it has one, and its scaling.
fn parse_entry(
    field: &str,
    v: &Value,
    proportional: bool,
) -> Result<(Option<f64>, Option<RopeScaling>), HfError> {
    if v.is_null() {
        return Ok((None, None));
    }
    let unsupported = |key: &str, value: &dyn std::fmt::Display, why: &str| {
        HfError::Unsupported(format!("`{field}.{key}` = {value}: {why}"))
    };
    let theta = v.get("rope_theta").and_then(Value::as_f64);
    let (key, kind) = match (v.get("rope_type"), v.get("type")) {
        (Some(t), _) => ("rope_type", t.as_str()),
        (None, Some(t)) => ("type", t.as_str()),
        (None, None) => ("rope_type", None),
    };
    let scaling = match kind {
        None | Some("default") => None,
        // The rotated share is the family's to read; a frequency factor is not implemented.
        Some("proportional")
            if proportional && v.get("factor").and_then(Value::as_f64).unwrap_or(1.0) == 1.0 =>
        {
            None
        }
        Some("llama3") => {
            let number = |name: &str| {
                v.get(name).and_then(Value::as_f64).ok_or_else(|| {
                    HfError::Unsupported(format!(
                        "`{field}.{name}` is missing: llama3 rope scaling needs it"
                    ))
                })
            };
            Some(RopeScaling::Llama3(Llama3Scaling {
                factor: number("factor")? as f32,
                low_freq_factor: number("low_freq_factor")? as f32,
                high_freq_factor: number("high_freq_factor")? as f32,
                original_max_position_embeddings: number("original_max_position_embeddings")?
                    as usize,
            }))
        }
        Some("yarn") => Some(RopeScaling::Yarn(yarn_of(field, v)?)),
        Some(other) => {
            return Err(unsupported(
                key,
                &other,
                "this RoPE scaling is not implemented (llama3 and yarn are)",
            ))
        }
    };
    Ok((theta, scaling))
}

/// A `yarn` entry: `factor` and `original_max_position_embeddings` required (a factor derived
/// from `max_position_embeddings` is refused), `beta_fast` 32, `beta_slow` 1, `truncate` true
/// and the paper's attention factor by default; `mscale` and `mscale_all_dim` are refused.
fn yarn_of(field: &str, v: &Value) -> Result<YarnScaling, HfError> {
    let number = |name: &str| v.get(name).and_then(Value::as_f64);
    let required = |name: &str| {
        number(name).ok_or_else(|| {
            HfError::Unsupported(format!(
                "`{field}.{name}` is missing: yarn rope scaling needs it"
            ))
        })
    };
    for name in ["mscale", "mscale_all_dim"] {
        if let Some(value) = number(name) {
            return Err(HfError::Unsupported(format!(
                "`{field}.{name}` = {value}: YaRN's mscale variants are not implemented"
            )));
        }
    }
    let factor = required("factor")? as f32;
    Ok(YarnScaling {
        factor,
        original_max_position_embeddings: required("original_max_position_embeddings")? as usize,
        beta_fast: number("beta_fast").unwrap_or(32.0) as f32,
        beta_slow: number("beta_slow").unwrap_or(1.0) as f32,
        truncate: v.get("truncate").and_then(Value::as_bool).unwrap_or(true),
        attention_factor: number("attention_factor").map_or_else(
            || YarnScaling::default_attention_factor(factor),
            |f| f as f32,
        ),
    })
}

/// The `rope_parameters` entry of one layer type (`full_attention`, `sliding_attention`), as
/// written: for a family that reads keys of its own there (Gemma 4's partial rotary factor).
pub(super) fn per_type_entry<'a>(raw: &'a RopeFields, kind: &str) -> Option<&'a Value> {
    raw.rope_parameters
        .as_ref()?
        .get(kind)
        .filter(|v| v.is_object())
}

pub(super) fn rope_of(raw: &RopeFields, defaults: RopeDefaults) -> Result<Rope, HfError> {
    let partial_rotary_factor = partial_rotary_factor(raw, defaults)?;
    let rope = plain_rope_of(raw, defaults)?;
    Ok(Rope {
        partial_rotary_factor,
        ..rope
    })
}

/// `partial_rotary_factor` from the top level or `rope_parameters` (1 when absent), refused
/// where the family does not turn part of a head.
fn partial_rotary_factor(raw: &RopeFields, defaults: RopeDefaults) -> Result<f64, HfError> {
    let nested = raw
        .rope_parameters
        .as_ref()
        .and_then(|p| p.get("partial_rotary_factor"))
        .and_then(Value::as_f64);
    let factor = nested
        .or(raw.partial_rotary_factor)
        .or(defaults.partial_rotary)
        .unwrap_or(1.0);
    let valid = factor > 0.0 && factor <= 1.0;
    if !valid || (factor != 1.0 && defaults.partial_rotary.is_none()) {
        return Err(HfError::Unsupported(format!(
            "`partial_rotary_factor` = {factor}: partial RoPE is implemented for qwen3_next and \
             qwen3_5 (factors in (0, 1])"
        )));
    }
    Ok(factor)
}

fn plain_rope_of(raw: &RopeFields, defaults: RopeDefaults) -> Result<Rope, HfError> {
    // A family whose sliding layers have a base of their own (gemma3).
    let own_local = defaults.local_theta.is_some();
    let default_theta = defaults.theta;
    let default_local = defaults.local_theta.unwrap_or(default_theta);
    let layer = |theta: f64, scaled: bool| LayerRope {
        theta: theta as f32,
        scaled,
    };

    let params = raw.rope_parameters.as_ref().filter(|v| !v.is_null());
    let per_type = params.filter(|p| {
        p.get("full_attention").is_some_and(Value::is_object)
            || p.get("sliding_attention").is_some_and(Value::is_object)
    });
    if let Some(p) = per_type {
        let null = Value::Null;
        let entry = |kind: &str| {
            let field = format!("rope_parameters.{kind}");
            parse_entry(&field, p.get(kind).unwrap_or(&null), defaults.proportional)
        };
        let (full_theta, full_scaling) = entry("full_attention")?;
        let (local_theta, local_scaling) = entry("sliding_attention")?;
        let scaling = match (full_scaling, local_scaling) {
            (Some(a), Some(b)) if a != b => {
                return Err(HfError::Unsupported(
                    "`rope_parameters`: different rope scalings per layer type".into(),
                ))
            }
            (a, b) => a.or(b),
        };
        // Without scaling the flag is moot; it is set as the legacy layout sets it, so both
        // layouts give the same config.
        let unscaled = scaling.is_none();
        return Ok(Rope {
            full: layer(
                full_theta.unwrap_or(default_theta),
                full_scaling.is_some() || unscaled,
            ),
            sliding: layer(
                local_theta.unwrap_or(default_local),
                local_scaling.is_some() || (unscaled && !own_local),
            ),
            scaling,
            partial_rotary_factor: 1.0,
        });
    }

    let (theta, scaling) = match params {
        Some(p) => parse_entry("rope_parameters", p, defaults.proportional)?,
        None => {
            let (_, scaling) = match &raw.rope_scaling {
                Some(v) => parse_entry("rope_scaling", v, defaults.proportional)?,
                None => (None, None),
            };
            (raw.rope_theta, scaling)
        }
    };
    let theta = theta.or(raw.rope_theta).unwrap_or(default_theta);
    let sliding = if own_local {
        // Sliding layers with a base of their own (gemma3): the local base, never scaled.
        layer(raw.rope_local_base_freq.unwrap_or(default_local), false)
    } else {
        layer(theta, true)
    };
    Ok(Rope {
        full: layer(theta, true),
        sliding,
        scaling,
        partial_rotary_factor: 1.0,
    })
}
