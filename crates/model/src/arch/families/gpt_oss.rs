//! gpt-oss: Q/K/V and output projections with biases, a learned sink logit per query head in
//! every softmax, layers alternating 128-token sliding and full attention (`layer_types`),
//! YaRN RoPE over whole heads (halves style), and a mixture of experts with a biased router
//! (softmax over the chosen logits) and clamped-SwiGLU experts with biases.
//!
//! transformers stores the experts transposed and gate/up interleaved: `gate_up_proj` is
//! `[experts, hidden, 2 * width]` with gate in the even columns and up in the odd ones,
//! `down_proj` `[experts, width, hidden]`; `hf_finish` writes them as the layer plan's stacks
//! (`[experts, rows, cols]`). MXFP4 checkpoints (`quantization_config: mxfp4`, hf::mxfp4) store
//! the experts in the plan's orientation with gate and up rows interleaved; they stay MXFP4.

use std::sync::Arc;

use crate::arch::rows::Rows;
use crate::arch::Family;
use crate::config::{
    Activation, Arch, BlockVariant, LayerAttention, ModelConfig, RopeScaling, RopeStyle,
    YarnScaling, CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT,
};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{HfConfig, HfError, HfTranslation, MoeConvention, RopeDefaults};
use crate::quant::DType;
use crate::tensor_names::LayerTensor;
use crate::weights::{ModelWeights, Storage, WeightTensor};

pub(super) const FAMILIES: &[&dyn Family] = &[&GptOss];

/// transformers' GptOssConfig defaults.
const DEFAULT_WINDOW: usize = 128;
const DEFAULT_ROPE: RopeDefaults = RopeDefaults {
    theta: 150_000.0,
    ..RopeDefaults::PLAIN
};
/// Every expert `intermediate_size` wide, every layer sparse, the chosen logits' softmax (the
/// renormalised softmax of all of them).
const EXPERTS: MoeConvention = MoeConvention {
    own_expert_width: false,
    sparse_step: false,
    shared_expert: false,
    always_renormalise: true,
};
/// The names `hf_tensor_name` gives the stored expert tensors, rewritten by `hf_finish`.
const GATE_UP_EXPS: &str = "ffn_gate_up_exps.weight";
const GATE_UP_EXPS_BIAS: &str = "ffn_gate_up_exps.bias";
const DOWN_EXPS_STORED: &str = "ffn_down_exps_stored.weight";

pub struct GptOss;

impl Family for GptOss {
    fn hf_class(&self) -> Option<&'static str> {
        Some("GptOssForCausalLM")
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some("gpt_oss")
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        &["gpt-oss"]
    }

    /// llama.cpp's `gpt-oss` files (its converter splits gate and up, keeps the experts MXFP4):
    /// even layers slide over `attention.sliding_window`, YaRN from `rope.scaling.*` with
    /// transformers' `truncate: false` of the released config (the file does not store it; llama.cpp
    /// truncates), the sinks, biases and clamped SwiGLU as the checkpoints have them.
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        let config = g.base_with(Arch::GptOss, RopeStyle::Halves, true, true)?;
        let meta = g.meta;
        let scaling = match meta.opt_str(&g.key("rope.scaling.type"))? {
            None => None,
            Some("yarn") => {
                let factor = meta.f32(&g.key("rope.scaling.factor"))?;
                Some(RopeScaling::Yarn(YarnScaling {
                    factor,
                    original_max_position_embeddings: meta
                        .usize(&g.key("rope.scaling.original_context_length"))?,
                    beta_fast: meta
                        .opt_f32(&g.key("rope.scaling.yarn_beta_fast"))?
                        .unwrap_or(32.0),
                    beta_slow: meta
                        .opt_f32(&g.key("rope.scaling.yarn_beta_slow"))?
                        .unwrap_or(1.0),
                    truncate: false,
                    attention_factor: YarnScaling::default_attention_factor(factor),
                }))
            }
            Some(other) => {
                return Err(GgufError::Unsupported(format!(
                    "{} = {other} (yarn is read)",
                    g.key("rope.scaling.type")
                )))
            }
        };
        let window = meta.usize(&g.key("attention.sliding_window"))?;
        let theta = config.rope_theta;
        let layer_attention = (0..config.num_layers)
            .map(|layer| LayerAttention {
                sliding_window: (layer % 2 == 0).then_some(window),
                rope_theta: theta,
                rope_scaled: true,
            })
            .collect();
        let Some(mut moe) = config.moe.clone() else {
            return Err(GgufError::Corrupt("a gpt-oss file without experts".into()));
        };
        moe.biases = g.has_tensor(&LayerTensor::FfnGateInpBias.of(0));
        Ok(ModelConfig {
            block: BlockVariant {
                activation: Activation::ClampedSwiglu,
                attn_sinks: true,
                attn_output_bias: g.has_tensor(&LayerTensor::AttnOutputBias.of(0)),
                ..config.block
            },
            rope_scaling: scaling,
            layer_attention,
            moe: Some(moe),
            ..config
        })
    }

    /// llama.cpp names the pre-MLP norm `post_attention_norm`.
    fn gguf_finish(&self, config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), GgufError> {
        for layer in 0..config.num_layers {
            let post = format!("blk.{layer}.post_attention_norm.weight");
            if let Some(norm) = weights.tensors.remove(&post) {
                weights.tensors.insert(LayerTensor::FfnNorm.of(layer), norm);
            }
        }
        Ok(())
    }

    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        c.check_implemented(true)?;
        for (field, value, implemented) in [
            ("swiglu_alpha", c.swiglu_alpha, CLAMPED_SWIGLU_ALPHA),
            ("swiglu_limit", c.swiglu_limit, CLAMPED_SWIGLU_LIMIT),
        ] {
            if let Some(v) = value.filter(|&v| v as f32 != implemented) {
                return Err(HfError::Unsupported(format!(
                    "`{field}` = {v}: the clamped SwiGLU is implemented for gpt-oss's {implemented}"
                )));
            }
        }
        let rope = c.rope(DEFAULT_ROPE)?;
        let window = Some(c.sliding_window.unwrap_or(DEFAULT_WINDOW));
        // transformers' default pattern: even layers slide, odd ones are full.
        let windows = c.layer_windows(window, |layer| layer % 2 == 0)?;
        let Some(mut moe) = c.moe(&EXPERTS)? else {
            return Err(HfError::Unsupported(
                "a gpt_oss config without experts (`num_local_experts` = 0)".into(),
            ));
        };
        moe.biases = true;
        let block = BlockVariant {
            activation: Activation::ClampedSwiglu,
            attn_sinks: true,
            attn_output_bias: c.attention_bias.unwrap_or(true),
            ..BlockVariant::llama(c.head_dim())
        };
        Ok(c.model_config(HfTranslation {
            arch: Arch::GptOss,
            rope,
            windows,
            block,
            rope_style: RopeStyle::Halves,
            tied_by_default: false,
            qkv_bias: c.attention_bias.unwrap_or(true),
            moe: Some(moe),
            linear_attention: None,
        }))
    }

    /// The sinks, router and stacked experts are not `weight` / `bias` tensors of a module the
    /// common names know.
    fn hf_tensor_name(&self, hf: &str) -> Option<String> {
        let Some((layer, rest)) = hf
            .strip_prefix("model.layers.")
            .and_then(|r| r.split_once('.'))
            .and_then(|(layer, rest)| Some((layer.parse::<usize>().ok()?, rest)))
        else {
            return crate::hf::canonical_name(hf);
        };
        let name = match rest {
            "self_attn.sinks" => LayerTensor::AttnSinks.suffix(),
            "mlp.router.weight" => LayerTensor::FfnGateInp.suffix(),
            "mlp.router.bias" => LayerTensor::FfnGateInpBias.suffix(),
            "mlp.experts.gate_up_proj" => GATE_UP_EXPS,
            "mlp.experts.gate_up_proj_bias" => GATE_UP_EXPS_BIAS,
            "mlp.experts.down_proj" => DOWN_EXPS_STORED,
            "mlp.experts.down_proj_bias" => LayerTensor::FfnDownExpsBias.suffix(),
            _ => return crate::hf::canonical_name(hf),
        };
        Some(format!("blk.{layer}.{name}"))
    }

    fn hf_finish(&self, config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), HfError> {
        for layer in 0..config.num_layers {
            let mut take = |suffix: &str| {
                weights
                    .tensors
                    .remove(&format!("blk.{layer}.{suffix}"))
                    .ok_or_else(|| HfError::Weights(format!("layer {layer} has no `{suffix}`")))
            };
            let (gate_up, gate_up_bias, down) = (
                take(GATE_UP_EXPS)?,
                take(GATE_UP_EXPS_BIAS)?,
                take(DOWN_EXPS_STORED)?,
            );
            let experts = gate_up.shape.first().copied().unwrap_or(0);
            let [gate, up, down] = if gate_up.dtype == DType::Mxfp4 {
                mxfp4_experts(layer, &gate_up, down)?
            } else {
                float_experts(layer, &gate_up, &down)?
            };
            let width = gate.shape[1];
            if gate_up_bias.shape != [experts, 2 * width] {
                return Err(shape_error(layer, "gate_up_proj_bias", &gate_up_bias.shape));
            }
            let gate_bias = regather(&gate_up_bias, experts, 1, width, |e, _, c| {
                e * 2 * width + 2 * c
            })?;
            let up_bias = regather(&gate_up_bias, experts, 1, width, |e, _, c| {
                e * 2 * width + 2 * c + 1
            })?;
            let mut put = |t: LayerTensor, tensor: WeightTensor| {
                weights.tensors.insert(t.of(layer), tensor);
            };
            put(LayerTensor::FfnGateExps, gate);
            put(LayerTensor::FfnUpExps, up);
            put(LayerTensor::FfnDownExps, down);
            let squeeze = |t: WeightTensor| WeightTensor {
                shape: vec![experts, width],
                ..t
            };
            put(LayerTensor::FfnGateExpsBias, squeeze(gate_bias));
            put(LayerTensor::FfnUpExpsBias, squeeze(up_bias));
        }
        Ok(())
    }
}

/// Float experts as transformers keeps them: `gate_up` `[e][h][2w]` -> gate `[e][w][h]`
/// (columns 2j) and up (columns 2j + 1); `down` `[e][w][h]` -> `[e][h][w]`.
fn float_experts(
    layer: usize,
    gate_up: &WeightTensor,
    down: &WeightTensor,
) -> Result<[WeightTensor; 3], HfError> {
    let [experts, hidden, twice_width] = gate_up.shape[..] else {
        return Err(shape_error(layer, "gate_up_proj", &gate_up.shape));
    };
    let width = twice_width / 2;
    if down.shape != [experts, width, hidden] {
        return Err(shape_error(layer, "down_proj", &down.shape));
    }
    Ok([
        regather(gate_up, experts, width, hidden, |e, r, c| {
            (e * hidden + c) * 2 * width + 2 * r
        })?,
        regather(gate_up, experts, width, hidden, |e, r, c| {
            (e * hidden + c) * 2 * width + 2 * r + 1
        })?,
        regather(down, experts, hidden, width, |e, r, c| {
            (e * width + c) * hidden + r
        })?,
    ])
}

/// MXFP4 experts are stored `[e][rows][cols]` already (the plan's orientation): gate is the
/// even rows of `gate_up`, up the odd ones (whole blocks, no value changes).
fn mxfp4_experts(
    layer: usize,
    gate_up: &WeightTensor,
    down: WeightTensor,
) -> Result<[WeightTensor; 3], HfError> {
    let [experts, twice_width, hidden] = gate_up.shape[..] else {
        return Err(shape_error(layer, "gate_up_proj", &gate_up.shape));
    };
    let width = twice_width / 2;
    if down.shape != [experts, hidden, width] || down.dtype != DType::Mxfp4 {
        return Err(shape_error(layer, "down_proj", &down.shape));
    }
    let rows_of = |parity: usize| {
        let mut rows = Rows::of(gate_up);
        for r in 0..experts * width {
            rows.take(gate_up, 2 * r + parity, 1);
        }
        WeightTensor {
            shape: vec![experts, width, hidden],
            ..rows.tensor(hidden)
        }
    };
    Ok([rows_of(0), rows_of(1), down])
}

fn shape_error(layer: usize, what: &str, shape: &[usize]) -> HfError {
    HfError::Weights(format!(
        "layer {layer}: gpt-oss expert tensor `{what}` has shape {shape:?}"
    ))
}

/// A `[stacks, rows, cols]` tensor whose element `(s, r, c)` is `source`'s element
/// `at(s, r, c)` (a flat index), for float storage (each element whole bytes).
fn regather(
    source: &WeightTensor,
    stacks: usize,
    rows: usize,
    cols: usize,
    at: impl Fn(usize, usize, usize) -> usize,
) -> Result<WeightTensor, HfError> {
    let size = match source.dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 2,
        other => {
            return Err(HfError::Weights(format!(
                "gpt-oss experts stored as {other:?}: only float checkpoints are read"
            )))
        }
    };
    let bytes = source.storage.bytes();
    let elements: usize = source.shape.iter().product();
    if bytes.len() != elements * size {
        return Err(HfError::Weights(format!(
            "a gpt-oss expert tensor of shape {:?} has {} bytes",
            source.shape,
            bytes.len()
        )));
    }
    let mut out = Vec::with_capacity(stacks * rows * cols * size);
    for s in 0..stacks {
        for r in 0..rows {
            for c in 0..cols {
                let i = at(s, r, c) * size;
                out.extend_from_slice(&bytes[i..i + size]);
            }
        }
    }
    Ok(WeightTensor {
        dtype: source.dtype,
        shape: vec![stacks, rows, cols],
        storage: Storage::Owned(Arc::new(out)),
    })
}
