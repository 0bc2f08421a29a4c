//! An EAGLE-3 draft head's weights on the device (`plan::Eagle3Spec` has the math), in one
//! allocation of their own beside the model's: matrices bf16 (the file's dtype widened; heads
//! ship bf16), Q/K/V and gate/up fused as the decoder's layers have them, norms f32 with the
//! norm weight offset folded in, and the target id of every draft-vocabulary entry.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::load::Eagle3Head;
use ferrite_model::plan::{eagle3 as names, AttentionSpec, Mixer as PlanMixer, MlpSpec};
use ferrite_model::tensor_names::LayerTensor;
use ferrite_model::weights::{ModelWeights as HostWeights, WeightTensor};

use super::upload::{upload_matrix, vector_f32};
use super::{AttentionWeights, LayerWeights, Mixer, Mlp, QkNormWeights};
use crate::buffer::{upload, DeviceBuffer, Layout};
use crate::device_ptr::DevicePtr;
use crate::linear::{Linear, Matrix, MatrixFormat};

pub struct Eagle3Weights {
    pub spec: ferrite_model::plan::Eagle3Spec,
    /// [hidden, 3 target hidden]: over the target's three captured layer inputs.
    pub fc: Linear,
    pub hidden_norm: DevicePtr,
    pub output_norm: DevicePtr,
    /// Its decoder layer (KV-cache layer `spec.index()`); `attn_norm` is the embedding's norm.
    pub layer: LayerWeights,
    /// Its own LM head over the draft vocabulary and, i32 [draft vocab], each entry's target
    /// id (`None`: it scores with the target's LM head).
    pub lm_head: Option<(Linear, DevicePtr)>,
    /// Its own token embedding (`None`: the target's).
    pub embedding: Option<Matrix>,
    _buf: DeviceBuffer,
}

/// What goes where in the head's allocation.
enum Item<'a> {
    /// File matrices stacked by rows into one bf16 matrix.
    Matrix(Vec<&'a WeightTensor>),
    Floats(Vec<f32>),
    Ints(Vec<i32>),
}

struct Plan<'a> {
    layout: Layout,
    items: Vec<(usize, Item<'a>)>,
}

impl<'a> Plan<'a> {
    fn add(&mut self, item: Item<'a>) -> usize {
        let bytes = match &item {
            Item::Matrix(parts) => parts.iter().map(|t| t.rows() * t.cols() * 2).sum(),
            Item::Floats(v) => v.len() * 4,
            Item::Ints(v) => v.len() * 4,
        };
        let at = self.layout.take(bytes.max(4));
        self.items.push((at, item));
        at
    }

    /// A bf16 linear layer of the file matrices `names` stacked by rows (all `k` wide).
    fn linear(&mut self, w: &'a HostWeights, names: &[String]) -> anyhow::Result<Pending> {
        let parts = names
            .iter()
            .map(|n| w.get(n))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let k = parts[0].cols();
        if let Some(odd) = parts.iter().zip(names).find(|(t, _)| t.cols() != k) {
            anyhow::bail!("`{}` is {} wide, `{}` {k}", odd.1, odd.0.cols(), names[0]);
        }
        let rows = parts.iter().map(|t| t.rows()).sum();
        let at = self.add(Item::Matrix(parts));
        Ok(Pending { at, rows, k })
    }

    fn vector(&mut self, w: &'a HostWeights, name: &str, shift: f32) -> anyhow::Result<usize> {
        Ok(self.add(Item::Floats(vector_f32(w.get(name)?, shift))))
    }
}

/// A linear layer's place before the allocation exists.
struct Pending {
    at: usize,
    rows: usize,
    k: usize,
}

impl Pending {
    fn on(&self, buf: &DeviceBuffer) -> Linear {
        Linear::single(Matrix::bf16(buf.at(self.at)), self.rows, self.k)
    }
}

/// Refuses what the head's attention would need beyond a plain (Llama- or Qwen-style) layer.
fn check_attention(a: &AttentionSpec) -> anyhow::Result<()> {
    let extra = [
        (a.sinks, "attention sinks"),
        (a.output_bias, "an output bias"),
        (a.output_gate, "an output gate"),
        (a.v_norm, "a value norm"),
        (a.values_are_keys, "values equal to keys"),
        (a.window.is_some(), "a sliding window"),
    ];
    match extra.iter().find(|(has, _)| *has) {
        Some((_, what)) => anyhow::bail!("EAGLE-3 heads with {what} are not supported on CUDA"),
        None => Ok(()),
    }
}

impl Eagle3Weights {
    pub fn load(stream: &Arc<CudaStream>, head: &Eagle3Head) -> anyhow::Result<Eagle3Weights> {
        let spec = head.spec.clone();
        let (w, shift, l) = (&head.weights, spec.norm.weight_offset, spec.index());
        let PlanMixer::Attention(a) = &spec.layer.mixer else {
            anyhow::bail!("the EAGLE-3 head's layer is not an attention layer");
        };
        check_attention(a)?;
        let MlpSpec::Gated { activation, .. } = spec.layer.mlp else {
            anyhow::bail!("the EAGLE-3 head's MLP is not a dense gated MLP");
        };
        let mut plan = Plan {
            layout: Layout::new(),
            items: Vec::new(),
        };
        let t = |x: LayerTensor| x.of(l);
        let fc = plan.linear(w, &[names::FC.to_string()])?;
        let hidden_norm = plan.vector(w, names::HIDDEN_NORM, shift)?;
        let output_norm = plan.vector(w, names::OUTPUT_NORM, shift)?;
        let attn_norm = plan.vector(w, &t(LayerTensor::AttnNorm), shift)?;
        let ffn_norm = plan.vector(w, &t(LayerTensor::FfnNorm), shift)?;
        let qkv = [LayerTensor::AttnQ, LayerTensor::AttnK, LayerTensor::AttnV].map(t);
        let wqkv = plan.linear(w, &qkv)?;
        let wo = plan.linear(w, &[t(LayerTensor::AttnOutput)])?;
        let gate_up = plan.linear(w, &[t(LayerTensor::FfnGate), t(LayerTensor::FfnUp)])?;
        let down = plan.linear(w, &[t(LayerTensor::FfnDown)])?;
        let bias = match a.qkv_bias {
            true => {
                let mut all = Vec::with_capacity(a.q_dim() + 2 * a.kv_dim());
                for b in [
                    LayerTensor::AttnQBias,
                    LayerTensor::AttnKBias,
                    LayerTensor::AttnVBias,
                ] {
                    all.extend(vector_f32(w.get(&t(b))?, 0.0));
                }
                Some(plan.add(Item::Floats(all)))
            }
            false => None,
        };
        let qk_norm = match a.qk_norm {
            true => Some([
                plan.vector(w, &t(LayerTensor::AttnQNorm), shift)?,
                plan.vector(w, &t(LayerTensor::AttnKNorm), shift)?,
            ]),
            false => None,
        };
        let inv_freq = plan.add(Item::Floats(a.rope.inv_freq.clone()));
        let lm_head = match head.own_head {
            true => {
                let ids = head.draft_to_target.iter().map(|&id| id as i32).collect();
                Some((
                    plan.linear(w, &[names::OUTPUT.to_string()])?,
                    plan.add(Item::Ints(ids)),
                ))
            }
            false => None,
        };
        let embedding = head
            .own_embedding
            .then(|| plan.linear(w, &[names::TOKEN_EMBD.to_string()]))
            .transpose()?;
        let buf = DeviceBuffer::new(stream, plan.layout.bytes())?;
        for (at, item) in &plan.items {
            let dst = buf.at(*at);
            match item {
                Item::Matrix(parts) => {
                    let mut row = 0;
                    for part in parts {
                        upload_matrix(stream, &[dst], MatrixFormat::Bf16, row, part)?;
                        row += part.rows();
                    }
                }
                Item::Floats(v) => upload(stream, dst, v)?,
                Item::Ints(v) => upload(stream, dst, v)?,
            }
        }
        stream.synchronize()?;
        let layer = LayerWeights {
            attn_norm: buf.at(attn_norm),
            mixer: Mixer::Attention(Box::new(AttentionWeights {
                spec: a.clone(),
                wqkv: wqkv.on(&buf),
                bqkv: bias.map(|at| buf.at(at)),
                qk_norm: qk_norm.map(|[q, k]| QkNormWeights {
                    q: buf.at(q),
                    k: buf.at(k),
                }),
                wo: wo.on(&buf),
                bo: None,
                sinks: None,
                inv_freq: buf.at(inv_freq),
            })),
            ffn_norm: buf.at(ffn_norm),
            mlp: Mlp::Dense {
                activation,
                gate_up: gate_up.on(&buf),
                down: down.on(&buf),
            },
            post_norms: None,
        };
        Ok(Eagle3Weights {
            fc: fc.on(&buf),
            hidden_norm: buf.at(hidden_norm),
            output_norm: buf.at(output_norm),
            layer,
            lm_head: lm_head.map(|(linear, ids)| (linear.on(&buf), buf.at(ids))),
            embedding: embedding.map(|e| e.on(&buf).parts[0].matrix),
            spec,
            _buf: buf,
        })
    }

    /// Rows of its own LM head (0 when it scores with the target's).
    pub fn draft_vocab(&self) -> usize {
        self.lm_head.as_ref().map_or(0, |(linear, _)| linear.rows)
    }
}
