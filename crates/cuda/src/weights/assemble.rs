//! The device addresses of every tensor once the arena holds them: each layer's weights as its
//! spec describes them, the embedding and LM head, the multi-token-prediction layer.

use ferrite_model::plan::{self, LayerSpec, MlpSpec, ModelPlan, MtpSpec};
use ferrite_model::tensor_names::{LayerTensor, OUTPUT_NORM};

use super::arena::Arena;
use super::{
    AttentionWeights, LayerWeights, LinearAttentionWeights, Mixer, Mlp, ModelWeights, MoeWeights,
    MtpWeights, PostNormWeights, QkNormWeights,
};
use crate::buffer::DeviceBuffer;
use crate::device_ptr::DevicePtr;
use crate::launchers::ExpertMatrix;
use crate::linear::{Linear, Matrix, MatrixFormat, Part};

/// The arena's plan resolved against the allocation.
struct Places<'a> {
    plan: &'a Arena,
    arena: &'a DeviceBuffer,
}

impl Places<'_> {
    fn vector(&self, name: &str) -> anyhow::Result<DevicePtr> {
        let at = self.plan.vectors.get(name);
        Ok(self
            .arena
            .at(*at.ok_or_else(|| anyhow::anyhow!("no place for `{name}`"))?))
    }

    fn linear(&self, name: &str) -> anyhow::Result<Linear> {
        let lp = self
            .plan
            .linears
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no linear layer `{name}`"))?;
        let parts = lp.parts.iter().map(|p| {
            let mut planes = [None; 3];
            for (slot, &at) in planes.iter_mut().zip(&p.planes) {
                *slot = Some(self.arena.at(at));
            }
            Part {
                row0: p.row0,
                rows: p.rows,
                matrix: Matrix {
                    format: p.format,
                    planes,
                },
            }
        });
        Ok(Linear {
            rows: lp.rows,
            k: lp.k,
            parts: parts.collect(),
        })
    }

    fn stack(&self, name: &str) -> anyhow::Result<ExpertMatrix> {
        let at = self.plan.experts.get(name);
        Ok(at
            .ok_or_else(|| anyhow::anyhow!("no expert stack `{name}`"))?
            .on(self.arena))
    }

    /// Layer `spec`'s weights; a linear-attention layer's state starts `state_len` floats
    /// into a slot, and `state_len` grows by its state.
    fn layer(&self, spec: &LayerSpec, state_len: &mut usize) -> anyhow::Result<LayerWeights> {
        let l = spec.index;
        let n = |p: &str| format!("blk.{l}.{p}");
        let vector = |t: LayerTensor| self.vector(&t.of(l));
        let mixer = match &spec.mixer {
            plan::Mixer::Attention(a) => Mixer::Attention(Box::new(AttentionWeights {
                spec: a.clone(),
                wqkv: self.linear(&n("attn_qkv"))?,
                bqkv: a
                    .qkv_bias
                    .then(|| self.vector(&n("attn_qkv_bias")))
                    .transpose()?,
                qk_norm: match a.qk_norm {
                    true => Some(QkNormWeights {
                        q: vector(LayerTensor::AttnQNorm)?,
                        k: vector(LayerTensor::AttnKNorm)?,
                    }),
                    false => None,
                },
                wo: self.linear(&n("attn_output"))?,
                bo: a
                    .output_bias
                    .then(|| vector(LayerTensor::AttnOutputBias))
                    .transpose()?,
                sinks: a
                    .sinks
                    .then(|| vector(LayerTensor::AttnSinks))
                    .transpose()?,
                inv_freq: self.vector(&n("rope_inv_freq"))?,
            })),
            plan::Mixer::LinearAttention(g) => {
                let state_offset = *state_len;
                *state_len += g.state_len();
                Mixer::LinearAttention(Box::new(LinearAttentionWeights {
                    spec: g.clone(),
                    w_in: self.linear(&n("ssm_in"))?,
                    conv: vector(LayerTensor::SsmConv1d)?,
                    dt_bias: vector(LayerTensor::SsmDtBias)?,
                    decay_rate: vector(LayerTensor::SsmA)?,
                    norm: vector(LayerTensor::SsmNorm)?,
                    w_out: self.linear(&n("ssm_out"))?,
                    state_offset,
                }))
            }
        };
        let mlp = match &spec.mlp {
            MlpSpec::Gated { activation, .. } => Mlp::Dense {
                activation: *activation,
                gate_up: self.linear(&n("ffn_gate_up"))?,
                down: self.linear(&n("ffn_down"))?,
            },
            MlpSpec::Experts { activation, moe } => Mlp::Sparse(Box::new(MoeWeights::assemble(
                moe,
                *activation,
                l,
                &|name| self.linear(name),
                &|name| self.stack(name),
                &|name| self.vector(name),
            )?)),
        };
        Ok(LayerWeights {
            attn_norm: vector(LayerTensor::AttnNorm)?,
            mixer,
            ffn_norm: vector(LayerTensor::FfnNorm)?,
            mlp,
            post_norms: match spec.post_norms {
                true => Some(PostNormWeights {
                    attention: vector(LayerTensor::PostAttentionNorm)?,
                    mlp: vector(LayerTensor::PostFfwNorm)?,
                }),
                false => None,
            },
        })
    }
}

/// The device addresses of every tensor of `model` (and of `mtp`), from the arena's plan.
pub(super) fn model_weights(
    model: &ModelPlan,
    mtp: Option<&MtpSpec>,
    plan: &Arena,
    arena: DeviceBuffer,
) -> anyhow::Result<ModelWeights> {
    let places = Places {
        plan,
        arena: &arena,
    };
    let mut state_len = 0;
    let layers = model
        .layers
        .iter()
        .map(|spec| places.layer(spec, &mut state_len))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mtp = match mtp {
        Some(m) => {
            let l = m.index();
            // An attention layer: it adds no recurrent state.
            let mut none = state_len;
            Some(MtpWeights {
                index: l,
                eh_proj: places.linear(&LayerTensor::NextnEhProj.of(l))?,
                enorm: places.vector(&LayerTensor::NextnEnorm.of(l))?,
                hnorm: places.vector(&LayerTensor::NextnHnorm.of(l))?,
                head_norm: places.vector(&LayerTensor::NextnSharedHeadNorm.of(l))?,
                layer: places.layer(&m.layer, &mut none)?,
            })
        }
        None => None,
    };
    let embed_linear = places.linear("token_embd")?;
    let embed = match embed_linear.parts.as_slice() {
        [only] => only.matrix,
        _ => anyhow::bail!("the embedding table must be one matrix"),
    };
    let lm_head = match model.tied_output {
        true => embed_linear,
        false => places.linear("output")?,
    };
    let largest_quantized = plan
        .linears
        .values()
        .flat_map(|lp| lp.parts.iter().map(move |p| (lp.k, p)))
        .filter(|(_, p)| matches!(p.format, MatrixFormat::Quant(_)))
        .map(|(k, p)| p.rows * k * 2)
        .max()
        .unwrap_or(0);
    Ok(ModelWeights {
        embed,
        layers,
        output_norm: places.vector(OUTPUT_NORM)?,
        norm: model.norm,
        embedding_scale: model.embedding_scale,
        lm_head,
        largest_quantized,
        state_len,
        mtp,
        arena,
    })
}
