//! `ModelWeights`: the decoder's weights in the form the forward pass reads (matrices stay
//! quantized, or bf16/f16 as stored, and are dequantized panel by panel; vectors such as norms
//! and biases are dequantized to f32 once, with gemma's `1 + w` norm offset folded in), built
//! from the model crate's tensors as loaded (`LoadedWeights` here). A mixture-of-experts
//! layer's MLP is `moe::MoeWeights`.

use ferrite_model::config::ModelConfig;
use ferrite_model::weights::{ModelWeights as LoadedWeights, WeightTensor};

use crate::kernels::quant_matrix::{load_matrix as matrix, QuantMatrix};
use crate::moe::MoeWeights;
use crate::quant::dequantize_row;
use ferrite_model::tensor_names::{LayerTensor, OUTPUT, OUTPUT_NORM, TOKEN_EMBD};

#[derive(Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: QuantMatrix,
    pub wk: QuantMatrix,
    pub wv: QuantMatrix,
    /// Q, K, V biases (qwen2).
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMSNorm weights of Q and K, `head_dim` each (qwen3, gemma3).
    pub qk_norm: Option<[Vec<f32>; 2]>,
    pub wo: QuantMatrix,
    /// RMSNorm weights of the attention output and of the MLP output (gemma3).
    pub post_norms: Option<[Vec<f32>; 2]>,
    /// The norm before the MLP (gemma3's pre_feedforward_layernorm).
    pub ffn_norm: Vec<f32>,
    pub mlp: Mlp,
}

/// A layer's MLP: dense SwiGLU/GeGLU, or a mixture of experts.
#[derive(Debug)]
pub enum Mlp {
    Dense {
        gate: QuantMatrix,
        up: QuantMatrix,
        down: QuantMatrix,
    },
    Moe(MoeWeights),
}

#[derive(Debug)]
pub struct ModelWeights {
    pub embed: QuantMatrix,
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>,
    /// `output.weight`, or the embedding when tied.
    pub lm_head: QuantMatrix,
}

fn vector(weights: &LoadedWeights, name: &str, len: usize) -> anyhow::Result<Vec<f32>> {
    let tensor: &WeightTensor = weights.get(name)?;
    if tensor.shape.iter().product::<usize>() != len {
        anyhow::bail!("{name} has shape {:?}, the config says {len}", tensor.shape);
    }
    let mut out = vec![0.0; len];
    dequantize_row(tensor.dtype, tensor.storage.bytes(), &mut out)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(out)
}

/// An RMSNorm weight with the config's offset added (gemma stores `w` for a scale of `1 + w`),
/// in f32 as transformers adds it.
fn norm(weights: &LoadedWeights, name: &str, len: usize, offset: f32) -> anyhow::Result<Vec<f32>> {
    let mut w = vector(weights, name, len)?;
    if offset != 0.0 {
        w.iter_mut().for_each(|w| *w += offset);
    }
    Ok(w)
}

impl ModelWeights {
    pub fn new(config: &ModelConfig, weights: &LoadedWeights) -> anyhow::Result<Self> {
        let (hidden, inter, hd) = (
            config.hidden_size,
            config.intermediate_size,
            config.head_dim,
        );
        let (q_dim, kv_dim) = (config.num_heads * hd, config.num_kv_heads * hd);
        let offset = config.block.norm_weight_offset;
        let embed = matrix(weights, TOKEN_EMBD, config.vocab_size, hidden)?;
        // Tied files simply have no `output.weight`; some untied-in-name files do the same.
        let lm_head = if weights.tensors.contains_key(OUTPUT) {
            matrix(weights, OUTPUT, config.vocab_size, hidden)?
        } else {
            embed.clone()
        };
        let mut layers = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let qkv_bias = if config.qkv_bias {
                Some([
                    vector(weights, &LayerTensor::AttnQBias.of(i), q_dim)?,
                    vector(weights, &LayerTensor::AttnKBias.of(i), kv_dim)?,
                    vector(weights, &LayerTensor::AttnVBias.of(i), kv_dim)?,
                ])
            } else {
                None
            };
            let qk_norm = if config.block.qk_norm {
                Some([
                    norm(weights, &LayerTensor::AttnQNorm.of(i), hd, offset)?,
                    norm(weights, &LayerTensor::AttnKNorm.of(i), hd, offset)?,
                ])
            } else {
                None
            };
            let post_norms = if config.block.post_norms {
                Some([
                    norm(
                        weights,
                        &LayerTensor::PostAttentionNorm.of(i),
                        hidden,
                        offset,
                    )?,
                    norm(weights, &LayerTensor::PostFfwNorm.of(i), hidden, offset)?,
                ])
            } else {
                None
            };
            let mlp = match config.moe_at(i) {
                Some(moe) => Mlp::Moe(MoeWeights::new(weights, i, moe, hidden)?),
                None => Mlp::Dense {
                    gate: matrix(weights, &LayerTensor::FfnGate.of(i), inter, hidden)?,
                    up: matrix(weights, &LayerTensor::FfnUp.of(i), inter, hidden)?,
                    down: matrix(weights, &LayerTensor::FfnDown.of(i), hidden, inter)?,
                },
            };
            layers.push(LayerWeights {
                attn_norm: norm(weights, &LayerTensor::AttnNorm.of(i), hidden, offset)?,
                wq: matrix(weights, &LayerTensor::AttnQ.of(i), q_dim, hidden)?,
                wk: matrix(weights, &LayerTensor::AttnK.of(i), kv_dim, hidden)?,
                wv: matrix(weights, &LayerTensor::AttnV.of(i), kv_dim, hidden)?,
                qkv_bias,
                qk_norm,
                wo: matrix(weights, &LayerTensor::AttnOutput.of(i), hidden, q_dim)?,
                post_norms,
                ffn_norm: norm(weights, &LayerTensor::FfnNorm.of(i), hidden, offset)?,
                mlp,
            });
        }
        let output_norm = norm(weights, OUTPUT_NORM, hidden, offset)?;
        Ok(ModelWeights {
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
        let mut all = vec![&mut self.wq, &mut self.wk, &mut self.wv, &mut self.wo];
        match &mut self.mlp {
            Mlp::Dense { gate, up, down } => all.extend([gate, up, down]),
            Mlp::Moe(moe) => all.extend(moe.matrices_mut()),
        }
        all
    }

    fn bytes(&self) -> usize {
        let matrices = [&self.wq, &self.wk, &self.wv, &self.wo];
        let mlp = match &self.mlp {
            Mlp::Dense { gate, up, down } => {
                gate.bytes().len() + up.bytes().len() + down.bytes().len()
            }
            Mlp::Moe(moe) => moe.bytes(),
        };
        let vectors = [&self.attn_norm, &self.ffn_norm]
            .into_iter()
            .chain(self.qkv_bias.iter().flatten())
            .chain(self.qk_norm.iter().flatten())
            .chain(self.post_norms.iter().flatten());
        matrices.iter().map(|m| m.bytes().len()).sum::<usize>()
            + mlp
            + vectors.map(|v| v.len() * 4).sum::<usize>()
    }
}

impl ModelWeights {
    /// Every matrix a product reads (not the embedding, which is looked up).
    pub fn matrices_mut(&mut self) -> Vec<&mut QuantMatrix> {
        let mut all = vec![&mut self.lm_head];
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
            + lm_head
            + self.output_norm.len() * 4
            + self.layers.iter().map(LayerWeights::bytes).sum::<usize>()
    }
}
