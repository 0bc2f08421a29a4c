//! The Qwen hybrids: Qwen3.5 / Qwen3.6 (`qwen3_5` dense, `qwen3_5_moe`) and Qwen3-Next
//! (`qwen3_next`, MoE). Three layers in four are Gated DeltaNet linear attention
//! (`plan::LinearAttentionSpec`); the others are attention with a sigmoid output gate from a
//! doubled query projection, zero-centred `(1 + w)` Q/K norms and RoPE over a part of each head
//! (`partial_rotary_factor`, default 0.25). Every RMSNorm is `(1 + w)` but the linear layers'
//! gated output norm (plain `w`). The MoE layers are Qwen2-MoE's: softmax router, top-k,
//! `norm_topk_prob`, a shared expert behind a sigmoid gate.
//!
//! Qwen3.5 checkpoints are composite (`Qwen3_5ForConditionalGeneration`, the language model
//! under `model.language_model.`, a vision tower under `model.visual.`, which the text model
//! does not read). Their RoPE is multimodal (`mrope_section`), but for text the three position
//! streams are the same token position, which makes it the plain rotate-half RoPE.
//! Qwen3-Next stores the linear layers' projections interleaved per key head
//! (`in_proj_qkvz`, `in_proj_ba`); `hf_finish` lays them out as Qwen3.5 does. Both store
//! `A_log`, turned into the decay rate `A = -exp(A_log)` at load.

use crate::arch::Family;
use crate::config::{Activation, Arch, BlockVariant, LinearAttention, ModelConfig, RopeStyle};
use crate::gguf::{GgufConfig, GgufError};
use crate::hf::{self, HfConfig, HfError, HfTranslation, MoeConvention, RopeDefaults};
use crate::arch::rows::{f32_tensor, split_gate_up, Rows};
use crate::tensor_names::LayerTensor;
use crate::weights::{ModelWeights, WeightTensor};

pub(super) const FAMILIES: &[&dyn Family] = &[&QWEN3_5, &QWEN3_5_MOE, &QWEN3_NEXT];

/// Qwen3-Next's experts, Qwen2-MoE's: `moe_intermediate_size` wide, a shared expert,
/// `norm_topk_prob` renormalising the chosen probabilities.
const NEXT_EXPERTS: MoeConvention = MoeConvention {
    own_expert_width: true,
    sparse_step: true,
    shared_expert: true,
    always_renormalise: false,
};

/// Qwen3.5-MoE's router always renormalises the chosen probabilities (it has no
/// `norm_topk_prob`).
const QWEN3_5_EXPERTS: MoeConvention = MoeConvention {
    always_renormalise: true,
    ..NEXT_EXPERTS
};

/// transformers' default `partial_rotary_factor` for these families.
const DEFAULT_PARTIAL_ROTARY: f64 = 0.25;

/// Temporary names of the tensors `hf_finish` rewrites.
const A_LOG: &str = "ssm_a_log";
const QKVZ: &str = "ssm_in_qkvz.weight";
const BA: &str = "ssm_in_ba.weight";
const GATE_UP_EXPS: &str = "ffn_gate_up_exps.weight";
const Q_AND_GATE: &str = "attn_q_and_gate.weight";
const MTP: &str = "mtp.";

/// One of the three: its names, its experts' convention, its GGUF value-head order.
pub struct Hybrid {
    hf_class: &'static str,
    hf_model_type: &'static str,
    gguf_name: &'static [&'static str],
    /// `None` for the dense Qwen3.5.
    experts: Option<&'static MoeConvention>,
    /// llama.cpp's converter writes this family's value heads in tiled order.
    gguf_tiled_value_heads: bool,
}

const QWEN3_5: Hybrid = Hybrid {
    hf_class: "Qwen3_5ForConditionalGeneration",
    hf_model_type: "qwen3_5",
    gguf_name: &["qwen35"],
    experts: None,
    gguf_tiled_value_heads: true,
};

const QWEN3_5_MOE: Hybrid = Hybrid {
    hf_class: "Qwen3_5MoeForConditionalGeneration",
    hf_model_type: "qwen3_5_moe",
    gguf_name: &["qwen35moe"],
    experts: Some(&QWEN3_5_EXPERTS),
    gguf_tiled_value_heads: true,
};

const QWEN3_NEXT: Hybrid = Hybrid {
    hf_class: "Qwen3NextForCausalLM",
    hf_model_type: "qwen3_next",
    gguf_name: &["qwen3next"],
    experts: Some(&NEXT_EXPERTS),
    gguf_tiled_value_heads: false,
};

impl Family for Hybrid {
    fn hf_class(&self) -> Option<&'static str> {
        Some(self.hf_class)
    }
    fn hf_model_type(&self) -> Option<&'static str> {
        Some(self.hf_model_type)
    }
    fn gguf_names(&self) -> &'static [&'static str] {
        self.gguf_name
    }
    fn from_hf(&self, c: &HfConfig) -> Result<ModelConfig, HfError> {
        hybrid_config(c, self.experts)
    }
    fn from_gguf(&self, g: &GgufConfig) -> Result<ModelConfig, GgufError> {
        hybrid_gguf(g, self.gguf_tiled_value_heads)
    }
    fn hf_tensor_name(&self, hf: &str) -> Option<String> {
        hybrid_tensor_name(hf)
    }
    fn hf_finish(&self, config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), HfError> {
        finish(config, weights)
    }
    fn gguf_finish(
        &self,
        config: &ModelConfig,
        weights: &mut ModelWeights,
    ) -> Result<(), GgufError> {
        gguf_finish(config, weights)
    }
}

/// The config of any of the three: `experts`, the convention of a mixture of experts.
fn hybrid_config(c: &HfConfig, experts: Option<&MoeConvention>) -> Result<ModelConfig, HfError> {
    c.check_implemented(false)?;
    let defaults = RopeDefaults {
        partial_rotary: Some(DEFAULT_PARTIAL_ROTARY),
        ..RopeDefaults::PLAIN
    };
    let rope = c.rope(defaults)?;
    let head_dim = c.head_dim();
    let rotary_dim = (head_dim as f64 * rope.partial_rotary_factor) as usize;
    let Some(linear_attention) = c.linear_attention()? else {
        return Err(HfError::Unsupported(
            "a qwen3_5 / qwen3_next config without `linear_num_key_heads`".into(),
        ));
    };
    let block = BlockVariant {
        qk_norm: true,
        norm_weight_offset: 1.0,
        activation: c.activation(Activation::Silu, false)?,
        // qwen3_5 says `attn_output_gate` (true in every release); qwen3_next always gates.
        attn_output_gate: c.attn_output_gate.unwrap_or(true),
        rotary_dim: (rotary_dim != head_dim).then_some(rotary_dim),
        ..BlockVariant::llama(head_dim)
    };
    let moe = match experts {
        Some(convention) => c.moe(convention)?,
        None => None,
    };
    Ok(c.model_config(HfTranslation {
        arch: Arch::Qwen3_5,
        rope,
        windows: vec![None; c.num_hidden_layers],
        block,
        rope_style: RopeStyle::Halves,
        tied_by_default: false,
        qkv_bias: false,
        moe,
        linear_attention: Some(linear_attention),
    }))
}

/// The config of a GGUF file as llama.cpp's converter writes these families: the linear
/// layers' shape in `ssm.*`, every `full_attention_interval`-th layer attention, norms stored
/// with their `+ 1` folded in, the experts always renormalised; `tiled`: `qwen35` files hold
/// the value heads in tiled order.
fn hybrid_gguf(g: &GgufConfig, tiled: bool) -> Result<ModelConfig, GgufError> {
    let config = g.base(Arch::Qwen3_5, RopeStyle::Halves, true)?;
    let (meta, key) = (g.meta, |suffix: &str| g.key(suffix));
    let num_key_heads = meta.usize(&key("ssm.group_count"))?;
    let num_value_heads = meta.usize(&key("ssm.time_step_rank"))?;
    let inner = meta.usize(&key("ssm.inner_size"))?;
    let interval = meta
        .opt_usize(&key("full_attention_interval"))?
        .unwrap_or(4)
        .max(1);
    let rotary = meta
        .opt_usize(&key("rope.dimension_count"))?
        .unwrap_or(config.head_dim);
    if num_value_heads == 0 || inner % num_value_heads != 0 {
        return Err(GgufError::Corrupt(format!(
            "{} = {inner} is not {num_value_heads} value heads",
            key("ssm.inner_size")
        )));
    }
    let linear_attention = LinearAttention {
        layers: (0..config.num_layers).map(|i| (i + 1) % interval != 0).collect(),
        num_key_heads,
        num_value_heads,
        key_head_dim: meta.usize(&key("ssm.state_size"))?,
        value_head_dim: inner / num_value_heads,
        conv_kernel: meta.usize(&key("ssm.conv_kernel"))?,
        tiled_value_heads: tiled,
    };
    Ok(ModelConfig {
        block: BlockVariant {
            qk_norm: true,
            attn_output_gate: true,
            rotary_dim: (rotary != config.head_dim).then_some(rotary),
            ..config.block
        },
        linear_attention: Some(linear_attention),
        ..config
    })
}

/// A GGUF file's attention layers keep Hugging Face's per-head query and gate rows in
/// `attn_q` and name the pre-MLP norm `post_attention_norm`; `qwen3next` files keep beta and
/// alpha grouped per key head in `ssm_ba`.
fn gguf_finish(config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), GgufError> {
    let bad = |e: HfError| GgufError::Corrupt(e.to_string());
    for layer in 0..config.num_layers {
        let post = format!("blk.{layer}.post_attention_norm.weight");
        if let Some(norm) = weights.tensors.remove(&post) {
            weights.tensors.insert(LayerTensor::FfnNorm.of(layer), norm);
        }
        if config.is_linear_attention(layer) {
            if let (Some(ba), Some(l)) = (
                weights.tensors.remove(&format!("blk.{layer}.ssm_ba.weight")),
                &config.linear_attention,
            ) {
                split_beta_alpha(l, layer, &ba, weights).map_err(bad)?;
            }
        } else if let Some(both) = weights.tensors.remove(&LayerTensor::AttnQ.of(layer)) {
            split_query_gate(config, layer, &both, weights).map_err(bad)?;
        }
    }
    Ok(())
}

/// `ssm_ba` per key head: its value heads' beta rows, then their alpha rows.
fn split_beta_alpha(
    l: &LinearAttention,
    layer: usize,
    ba: &WeightTensor,
    weights: &mut ModelWeights,
) -> Result<(), HfError> {
    let r = l.num_value_heads / l.num_key_heads;
    let hidden = ba.shape.last().copied().unwrap_or(0);
    if ba.shape != [2 * l.num_value_heads, hidden] {
        return Err(HfError::Weights(format!(
            "layer {layer}: ssm_ba {:?} is not {} value heads' beta and alpha",
            ba.shape, l.num_value_heads
        )));
    }
    let (mut b, mut a) = (Rows::of(ba), Rows::of(ba));
    for g in 0..l.num_key_heads {
        b.take(ba, g * 2 * r, r);
        a.take(ba, g * 2 * r + r, r);
    }
    weights.tensors.insert(LayerTensor::SsmBeta.of(layer), b.tensor(hidden));
    weights.tensors.insert(LayerTensor::SsmAlpha.of(layer), a.tensor(hidden));
    Ok(())
}

/// Canonical names: the language model of a composite checkpoint read as a plain one, the
/// linear layers' tensors under llama.cpp's `qwen35` names, the first MTP layer's under
/// `mtp.` until `finish` knows where it goes (`plan::MtpSpec`); the vision tower is not read.
fn hybrid_tensor_name(hf: &str) -> Option<String> {
    if let Some(rest) = hf.strip_prefix("mtp.") {
        return mtp_tensor_name(rest);
    }
    let plain = match hf.strip_prefix("model.language_model.") {
        Some(rest) => format!("model.{rest}"),
        None if hf.starts_with("model.") || hf == "lm_head.weight" => hf.to_string(),
        None => return None,
    };
    if let Some((layer, module)) = hf::layer_module(&plain) {
        let canonical = |t: LayerTensor| Some(t.of(layer));
        let temporary = |name: &str| Some(format!("blk.{layer}.{name}"));
        match module {
            "linear_attn.in_proj_qkv.weight" => return canonical(LayerTensor::AttnQkv),
            "linear_attn.in_proj_z.weight" => return canonical(LayerTensor::AttnGate),
            "linear_attn.in_proj_b.weight" => return canonical(LayerTensor::SsmBeta),
            "linear_attn.in_proj_a.weight" => return canonical(LayerTensor::SsmAlpha),
            "linear_attn.conv1d.weight" => return canonical(LayerTensor::SsmConv1d),
            "linear_attn.dt_bias" => return canonical(LayerTensor::SsmDtBias),
            "linear_attn.norm.weight" => return canonical(LayerTensor::SsmNorm),
            "linear_attn.out_proj.weight" => return canonical(LayerTensor::SsmOut),
            "linear_attn.A_log" => return temporary(A_LOG),
            "linear_attn.in_proj_qkvz.weight" => return temporary(QKVZ),
            "linear_attn.in_proj_ba.weight" => return temporary(BA),
            "self_attn.q_proj.weight" => return temporary(Q_AND_GATE),
            // transformers 5 saves the experts stacked, gate and up in one tensor.
            "mlp.experts.gate_up_proj" => return temporary(GATE_UP_EXPS),
            "mlp.experts.down_proj" => return canonical(LayerTensor::FfnDownExps),
            _ => {}
        }
    }
    hf::canonical_name(&plain)
}

/// The MTP layer's tensors (`mtp.*` of the checkpoint), named as a decoder layer's under a
/// temporary `mtp.` prefix. Only the first MTP layer is read (every release has one).
fn mtp_tensor_name(rest: &str) -> Option<String> {
    let nextn = |t: LayerTensor| Some(format!("{MTP}{}", t.suffix()));
    match rest {
        "fc.weight" => nextn(LayerTensor::NextnEhProj),
        "pre_fc_norm_embedding.weight" => nextn(LayerTensor::NextnEnorm),
        "pre_fc_norm_hidden.weight" => nextn(LayerTensor::NextnHnorm),
        "norm.weight" => nextn(LayerTensor::NextnSharedHeadNorm),
        _ => {
            let module = rest.strip_prefix("layers.0.")?;
            let name = hybrid_tensor_name(&format!("model.layers.0.{module}"))?;
            Some(format!("{MTP}{}", name.strip_prefix("blk.0.")?))
        }
    }
}

/// `A = -exp(A_log)` (in f32, as transformers computes it), Qwen3-Next's interleaved
/// projections laid out as Qwen3.5's, and the MTP layer's tensors moved to the layer index
/// after the decoder's (`blk.{num_layers}.*`).
fn finish(config: &ModelConfig, weights: &mut ModelWeights) -> Result<(), HfError> {
    let mtp: Vec<String> = weights
        .tensors
        .keys()
        .filter(|k| k.starts_with(MTP))
        .cloned()
        .collect();
    for name in mtp {
        if let Some(tensor) = weights.tensors.remove(&name) {
            let suffix = &name[MTP.len()..];
            let moved = format!("blk.{}.{suffix}", config.num_layers);
            weights.tensors.insert(moved, tensor);
        }
    }
    // The decoder's layers and the MTP layer after them.
    for layer in 0..=config.num_layers {
        if let Some(both) = weights.tensors.remove(&format!("blk.{layer}.{Q_AND_GATE}")) {
            split_query_gate(config, layer, &both, weights)?;
        }
        if let Some(gate_up) = weights.tensors.remove(&format!("blk.{layer}.{GATE_UP_EXPS}")) {
            split_gate_up(layer, &gate_up, weights)?;
        }
    }
    let Some(linear) = &config.linear_attention else {
        return Ok(());
    };
    for layer in (0..config.num_layers).filter(|&l| linear.is_linear(l)) {
        let a_log = format!("blk.{layer}.{A_LOG}");
        let tensor = weights
            .tensors
            .remove(&a_log)
            .ok_or_else(|| HfError::Weights(format!("layer {layer} has no `linear_attn.A_log`")))?;
        let a: Vec<f32> = crate::dequant::dequantize(&tensor)
            .iter()
            .map(|v| -v.exp())
            .collect();
        weights
            .tensors
            .insert(LayerTensor::SsmA.of(layer), f32_tensor(vec![a.len()], &a));
        let qkvz = weights.tensors.remove(&format!("blk.{layer}.{QKVZ}"));
        let ba = weights.tensors.remove(&format!("blk.{layer}.{BA}"));
        if let (Some(qkvz), Some(ba)) = (qkvz, ba) {
            split_interleaved(linear, layer, &qkvz, &ba, weights)?;
        }
    }
    Ok(())
}

/// Qwen3-Next's `in_proj_qkvz` holds, per key head, its q rows, k rows, then the v rows and
/// z rows of the value heads it serves; `in_proj_ba` per key head their b rows then a rows.
/// Written out as q of every head, k of every head, v of every head (`attn_qkv`), z
/// (`attn_gate`), b (`ssm_beta`) and a (`ssm_alpha`).
fn split_interleaved(
    l: &LinearAttention,
    layer: usize,
    qkvz: &WeightTensor,
    ba: &WeightTensor,
    weights: &mut ModelWeights,
) -> Result<(), HfError> {
    let (dk, dv, kh) = (l.key_head_dim, l.value_head_dim, l.num_key_heads);
    let r = l.num_value_heads / kh;
    let hidden = qkvz.shape.last().copied().unwrap_or(0);
    let per_head = 2 * dk + 2 * r * dv;
    if qkvz.shape != [kh * per_head, hidden] || ba.shape != [kh * 2 * r, hidden] {
        return Err(HfError::Weights(format!(
            "layer {layer}: in_proj_qkvz {:?} / in_proj_ba {:?} do not match {kh} key heads",
            qkvz.shape, ba.shape
        )));
    }
    let (q_rows, k_rows, v_rows, z_rows, b_rows, a_rows) = (
        Rows::of(qkvz),
        Rows::of(qkvz),
        Rows::of(qkvz),
        Rows::of(qkvz),
        Rows::of(ba),
        Rows::of(ba),
    );
    let mut parts = [q_rows, k_rows, v_rows, z_rows, b_rows, a_rows];
    for g in 0..kh {
        let at = g * per_head;
        let [q, k, v, z, b, a] = &mut parts;
        q.take(qkvz, at, dk);
        k.take(qkvz, at + dk, dk);
        v.take(qkvz, at + 2 * dk, r * dv);
        z.take(qkvz, at + 2 * dk + r * dv, r * dv);
        b.take(ba, g * 2 * r, r);
        a.take(ba, g * 2 * r + r, r);
    }
    let [q, k, v, z, b, a] = parts;
    let qkv = Rows {
        dtype: q.dtype,
        rows: q.rows + k.rows + v.rows,
        bytes: [q.bytes, k.bytes, v.bytes].concat(),
    };
    let out = &mut weights.tensors;
    out.insert(LayerTensor::AttnQkv.of(layer), qkv.tensor(hidden));
    out.insert(LayerTensor::AttnGate.of(layer), z.tensor(hidden));
    out.insert(LayerTensor::SsmBeta.of(layer), b.tensor(hidden));
    out.insert(LayerTensor::SsmAlpha.of(layer), a.tensor(hidden));
    Ok(())
}

/// The query projection of gated attention holds per head its `head_dim` query rows then its
/// `head_dim` gate rows: split into `attn_q` (every head's query) and `attn_output_gate`.
fn split_query_gate(
    config: &ModelConfig,
    layer: usize,
    both: &WeightTensor,
    weights: &mut ModelWeights,
) -> Result<(), HfError> {
    let (heads, hd) = (config.num_heads, config.head_dim);
    let hidden = both.shape.last().copied().unwrap_or(0);
    if both.shape != [2 * heads * hd, hidden] || !config.block.attn_output_gate {
        return Err(HfError::Weights(format!(
            "layer {layer}: q_proj {:?} is not {heads} heads of query and gate rows of {hd}",
            both.shape
        )));
    }
    let (mut q, mut gate) = (Rows::of(both), Rows::of(both));
    for h in 0..heads {
        q.take(both, 2 * h * hd, hd);
        gate.take(both, (2 * h + 1) * hd, hd);
    }
    let out = &mut weights.tensors;
    out.insert(LayerTensor::AttnQ.of(layer), q.tensor(hidden));
    out.insert(LayerTensor::AttnOutputGate.of(layer), gate.tensor(hidden));
    Ok(())
}

