//! `ModelWeights`: the decoder's weights in the form the forward pass reads (matrices stay
//! quantized, or bf16/f16 as stored, and are dequantized panel by panel; vectors such as norms
//! and biases are dequantized to f32 once, with gemma's `1 + w` norm offset folded in), built
//! from the model crate's tensors as loaded (`LoadedWeights` here). A mixture-of-experts
//! layer's MLP is `moe::MoeWeights`.

use ferrite_model::config::Activation;
use ferrite_model::plan::{self, AttentionSpec, LinearAttentionSpec, MlpSpec, ModelPlan};
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::kernels::quant_matrix::{load_matrix as matrix, QuantMatrix};
use crate::moe::{ExpertsBeside, MoeWeights};
use crate::per_layer_input::{PerLayerTables, PerLayerWeights};
use crate::weight_reader::{norm, LayerReader};
use ferrite_model::tensor_names::{LayerTensor, OUTPUT, OUTPUT_NORM};

/// One decoder layer as its `LayerSpec` describes it.
#[derive(Debug)]
pub struct LayerWeights {
    /// The norm before the mixer.
    pub attn_norm: Vec<f32>,
    pub mixer: Mixer,
    /// RMSNorm weights of the mixer's output and of the MLP's output (gemma3).
    pub post_norms: Option<[Vec<f32>; 2]>,
    /// The norm before the MLP (gemma3's pre_feedforward_layernorm).
    pub ffn_norm: Vec<f32>,
    pub mlp: Mlp,
    /// Gemma 4 (26B-A4B): the experts run beside the dense MLP.
    pub experts_beside: Option<Box<ExpertsBeside>>,
    /// Gemma 4: the per-layer input's gate, projection and norm.
    pub per_layer_input: Option<PerLayerWeights>,
    /// Gemma 4: the layer's output is multiplied by this.
    pub output_scale: Option<f32>,
}

/// A layer's mixer, one variant per `plan::Mixer`.
#[derive(Debug)]
pub enum Mixer {
    Attention(Box<Attention>),
    LinearAttention(Box<LinearAttention>),
}

/// Softmax attention: its spec (heads, window, scale, RoPE) and its matrices.
#[derive(Debug)]
pub struct Attention {
    pub spec: AttentionSpec,
    pub wq: QuantMatrix,
    /// `None` in a layer that reads another layer's K/V (`AttentionSpec::kv_source`).
    pub wk: Option<QuantMatrix>,
    /// `None` there too, and where the values are the keys' projection (`values_are_keys`).
    pub wv: Option<QuantMatrix>,
    /// Q, K, V biases (qwen2).
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMSNorm weights of Q and K, `head_dim` each (qwen3, gemma3; no K norm in a
    /// layer without K).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// Gated attention's output gate (`AttnOutputGate`).
    pub gate: Option<QuantMatrix>,
    pub wo: QuantMatrix,
    /// gpt-oss: the sink logit of each query head, and the output projection's bias.
    pub sinks: Option<Vec<f32>>,
    pub wo_bias: Option<Vec<f32>>,
}

/// Gated DeltaNet linear attention (`plan::LinearAttentionSpec` says the math): its
/// projections, convolution taps, per-head decay parameters and gated output norm.
#[derive(Debug)]
pub struct LinearAttention {
    pub spec: LinearAttentionSpec,
    /// q, k and v stacked, `[conv_channels, hidden]`.
    pub qkv: QuantMatrix,
    /// The output gate `z`, `[value_dim, hidden]`.
    pub gate: QuantMatrix,
    pub beta: QuantMatrix,
    pub alpha: QuantMatrix,
    /// The depthwise convolution, `[conv_channels, conv_kernel]` (taps oldest first).
    pub conv: Vec<f32>,
    pub dt_bias: Vec<f32>,
    /// `A = -exp(A_log)` per value head.
    pub a: Vec<f32>,
    /// The gated RMSNorm's weight, `value_head_dim` (used as stored: no offset).
    pub norm: Vec<f32>,
    pub out: QuantMatrix,
}

/// A layer's MLP, one variant per `plan::MlpSpec`: dense SwiGLU/GeGLU, or a mixture of experts.
#[derive(Debug)]
pub enum Mlp {
    Dense {
        activation: Activation,
        gate: QuantMatrix,
        up: QuantMatrix,
        down: QuantMatrix,
    },
    Moe {
        activation: Activation,
        weights: MoeWeights,
    },
}

#[derive(Debug)]
pub struct ModelWeights {
    pub embed: QuantMatrix,
    /// Gemma 4's per-layer input tables.
    pub per_layer: Option<PerLayerTables>,
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>,
    /// `output.weight`, or the embedding when tied.
    pub lm_head: QuantMatrix,
}

// Built by the layer reader of `weight_reader`.
impl LayerReader<'_> {
    pub(crate) fn layer(&self) -> anyhow::Result<LayerWeights> {
        use LayerTensor as T;
        let mixer = match &self.spec.mixer {
            plan::Mixer::Attention(a) => Mixer::Attention(Box::new(Attention {
                spec: a.clone(),
                wq: self.matrix(T::AttnQ)?,
                wk: a
                    .kv_source
                    .is_none()
                    .then(|| self.matrix(T::AttnK))
                    .transpose()?,
                wv: (a.kv_source.is_none() && !a.values_are_keys)
                    .then(|| self.matrix(T::AttnV))
                    .transpose()?,
                qkv_bias: match a.qkv_bias {
                    true => Some([
                        self.vector(T::AttnQBias)?,
                        self.vector(T::AttnKBias)?,
                        self.vector(T::AttnVBias)?,
                    ]),
                    false => None,
                },
                q_norm: a.qk_norm.then(|| self.norm(T::AttnQNorm)).transpose()?,
                k_norm: (a.qk_norm && a.kv_source.is_none())
                    .then(|| self.norm(T::AttnKNorm))
                    .transpose()?,
                gate: a
                    .output_gate
                    .then(|| self.matrix(T::AttnOutputGate))
                    .transpose()?,
                wo: self.matrix(T::AttnOutput)?,
                sinks: a.sinks.then(|| self.vector(T::AttnSinks)).transpose()?,
                wo_bias: a
                    .output_bias
                    .then(|| self.vector(T::AttnOutputBias))
                    .transpose()?,
            })),
            plan::Mixer::LinearAttention(l) => Mixer::LinearAttention(Box::new(LinearAttention {
                spec: l.clone(),
                qkv: self.matrix(T::AttnQkv)?,
                gate: self.matrix(T::AttnGate)?,
                beta: self.matrix(T::SsmBeta)?,
                alpha: self.matrix(T::SsmAlpha)?,
                conv: self.vector(T::SsmConv1d)?,
                dt_bias: self.vector(T::SsmDtBias)?,
                a: self.vector(T::SsmA)?,
                norm: self.vector(T::SsmNorm)?,
                out: self.matrix(T::SsmOut)?,
            })),
        };
        let mlp = match &self.spec.mlp {
            MlpSpec::Gated { activation, .. } => Mlp::Dense {
                activation: *activation,
                gate: self.matrix(T::FfnGate)?,
                up: self.matrix(T::FfnUp)?,
                down: self.matrix(T::FfnDown)?,
            },
            MlpSpec::Experts { activation, moe } => Mlp::Moe {
                activation: *activation,
                weights: MoeWeights::new(self.weights, self.spec, moe)?,
            },
        };
        let post_norms = match self.spec.post_norms {
            true => Some([self.norm(T::PostAttentionNorm)?, self.norm(T::PostFfwNorm)?]),
            false => None,
        };
        let output_scale = match self.spec.output_scale {
            true => Some(self.vector(T::LayerOutputScale)?[0]),
            false => None,
        };
        Ok(LayerWeights {
            attn_norm: self.norm(T::AttnNorm)?,
            mixer,
            post_norms,
            ffn_norm: self.norm(T::FfnNorm)?,
            mlp,
            experts_beside: ExpertsBeside::load(self)?.map(Box::new),
            per_layer_input: PerLayerWeights::load(self)?,
            output_scale,
        })
    }
}

impl ModelWeights {
    /// Every tensor `plan` names, read from `weights`.
    pub fn new(plan: &ModelPlan, weights: &LoadedWeights) -> anyhow::Result<Self> {
        let embedding = plan.embedding();
        let embed = matrix(weights, &embedding.name, embedding.rows(), embedding.cols())?;
        // Tied files simply have no `output.weight`; some untied-in-name files do the same.
        let lm_head = if weights.tensors.contains_key(OUTPUT) {
            matrix(weights, OUTPUT, plan.vocab_size, plan.hidden_size)?
        } else {
            embed.clone()
        };
        let offset = plan.norm.weight_offset;
        let layers = plan
            .layers
            .iter()
            .map(|spec| {
                let reader = LayerReader {
                    weights,
                    spec,
                    norm_offset: offset,
                };
                reader.layer()
            })
            .collect::<anyhow::Result<_>>()?;
        let output_norm = norm(weights, OUTPUT_NORM, plan.hidden_size, offset)?;
        Ok(ModelWeights {
            per_layer: PerLayerTables::load(plan, weights)?,
            embed,
            layers,
            output_norm,
            lm_head,
        })
    }
}

impl LayerWeights {
    /// The matrices the layer multiplies by.
    fn matrices_mut(&mut self) -> Vec<&mut QuantMatrix> {
        let mut all = match &mut self.mixer {
            Mixer::Attention(a) => {
                let mut all = vec![&mut a.wq, &mut a.wo];
                all.extend(a.wk.as_mut());
                all.extend(a.wv.as_mut());
                all.extend(a.gate.as_mut());
                all
            }
            Mixer::LinearAttention(l) => vec![
                &mut l.qkv,
                &mut l.gate,
                &mut l.beta,
                &mut l.alpha,
                &mut l.out,
            ],
        };
        match &mut self.mlp {
            Mlp::Dense { gate, up, down, .. } => all.extend([gate, up, down]),
            Mlp::Moe { weights, .. } => all.extend(weights.matrices_mut()),
        }
        if let Some(beside) = &mut self.experts_beside {
            all.extend(beside.moe.matrices_mut());
        }
        if let Some(p) = &mut self.per_layer_input {
            all.extend([&mut p.gate, &mut p.proj]);
        }
        all
    }

    fn bytes(&self) -> usize {
        let vector_bytes = |v: &Vec<f32>| v.len() * 4;
        let mixer = match &self.mixer {
            Mixer::Attention(a) => {
                [&a.wq, &a.wo]
                    .into_iter()
                    .chain(a.wk.as_ref())
                    .chain(a.wv.as_ref())
                    .chain(a.gate.as_ref())
                    .map(|m| m.bytes().len())
                    .sum::<usize>()
                    + a.qkv_bias.iter().flatten().map(vector_bytes).sum::<usize>()
                    + a.q_norm
                        .iter()
                        .chain(&a.k_norm)
                        .map(vector_bytes)
                        .sum::<usize>()
            }
            Mixer::LinearAttention(l) => {
                [&l.qkv, &l.gate, &l.beta, &l.alpha, &l.out]
                    .iter()
                    .map(|m| m.bytes().len())
                    .sum::<usize>()
                    + [&l.conv, &l.dt_bias, &l.a, &l.norm]
                        .into_iter()
                        .map(vector_bytes)
                        .sum::<usize>()
            }
        };
        let mlp = match &self.mlp {
            Mlp::Dense { gate, up, down, .. } => {
                gate.bytes().len() + up.bytes().len() + down.bytes().len()
            }
            Mlp::Moe { weights, .. } => weights.bytes(),
        };
        let norms = [&self.attn_norm, &self.ffn_norm]
            .into_iter()
            .chain(self.post_norms.iter().flatten());
        let extras = self.experts_beside.as_ref().map_or(0, |b| b.bytes())
            + self
                .per_layer_input
                .as_ref()
                .map_or(0, PerLayerWeights::bytes);
        mixer + mlp + extras + norms.map(vector_bytes).sum::<usize>()
    }
}

impl ModelWeights {
    /// Every matrix a product reads (not the embedding, which is looked up).
    pub fn matrices_mut(&mut self) -> Vec<&mut QuantMatrix> {
        let mut all = vec![&mut self.lm_head];
        if let Some(p) = &mut self.per_layer {
            all.push(&mut p.proj);
        }
        for layer in &mut self.layers {
            all.extend(layer.matrices_mut());
        }
        all
    }

    /// Bytes held (see `CpuBackend::weight_bytes`); a tied LM head shares the embedding's.
    pub fn bytes(&self) -> usize {
        let lm_head = if std::ptr::eq(self.lm_head.bytes().as_ptr(), self.embed.bytes().as_ptr()) {
            0
        } else {
            self.lm_head.bytes().len()
        };
        self.embed.bytes().len()
            + self.per_layer.as_ref().map_or(0, PerLayerTables::bytes)
            + lm_head
            + self.output_norm.len() * 4
            + self.layers.iter().map(LayerWeights::bytes).sum::<usize>()
    }
}
