//! Mixture-of-experts MLPs (qwen3_moe, qwen2_moe, mixtral): the weights as the forward pass
//! reads them (every expert a `QuantMatrix`, so GGUF experts stay quantized and a stacked
//! tensor of a mapped file is sliced, not copied) and the MLP itself (`forward`).

mod beside;
mod forward;
mod routing;

pub use beside::{BesideScratch, ExpertsBeside};
pub use forward::{moe_mlp, MoeScratch};

use ferrite_model::config::MoeConfig;
use ferrite_model::plan::LayerSpec;
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::kernels::quant_matrix::{checked_matrix as checked, load_matrix as matrix, QuantMatrix};
use crate::quant::dequantize_row;
use ferrite_model::tensor_names::{ExpertProj, LayerTensor};

/// One SwiGLU expert.
#[derive(Debug)]
pub struct Expert {
    pub gate: QuantMatrix,
    pub up: QuantMatrix,
    pub down: QuantMatrix,
    /// gpt-oss: the biases of gate, up and down.
    pub biases: Option<[Vec<f32>; 3]>,
}

/// qwen2_moe's shared expert and its gate (`sigmoid(gate · x)` scales its output).
#[derive(Debug)]
pub struct SharedExpert {
    pub mlp: Expert,
    /// `[1, hidden]`.
    pub gate: QuantMatrix,
}

#[derive(Debug)]
pub struct MoeWeights {
    /// `[experts, hidden]`: the router's logits are `x · routerᵀ` (+ `router_bias`, gpt-oss).
    pub router: QuantMatrix,
    pub router_bias: Option<Vec<f32>>,
    pub experts_per_token: usize,
    /// The chosen probabilities are divided by their sum (see `MoeConfig::norm_topk_prob`).
    pub norm_topk_prob: bool,
    pub experts: Vec<Expert>,
    pub shared: Option<SharedExpert>,
    /// Gemma 4: each chosen weight is multiplied by its expert's scale (after the top-k's
    /// renormalisation).
    pub expert_scale: Option<Vec<f32>>,
}

impl MoeWeights {
    /// The router, experts and shared expert of `layer`, named and shaped by its spec.
    pub fn new(
        weights: &LoadedWeights,
        layer_spec: &LayerSpec,
        moe: &MoeConfig,
    ) -> anyhow::Result<Self> {
        let layer = layer_spec.index;
        let (hidden, inter) = (layer_spec.hidden_size, moe.expert_intermediate_size);
        let planned = |t: LayerTensor| -> anyhow::Result<QuantMatrix> {
            let spec = layer_spec.required(t)?;
            matrix(weights, &spec.name, spec.rows(), spec.cols())
        };
        // Row `e` of a stacked `[experts, len]` bias, in f32.
        let bias_row = |t: LayerTensor, e: usize| -> anyhow::Result<Vec<f32>> {
            let spec = layer_spec.required(t)?;
            let tensor = weights.get(&spec.name)?;
            anyhow::ensure!(
                tensor.shape == spec.shape,
                "{} has shape {:?}, the config says {:?}",
                spec.name,
                tensor.shape,
                spec.shape
            );
            let len = spec.cols();
            let row_bytes = tensor.dtype.row_bytes(len);
            let bytes = &tensor.storage.bytes()[e * row_bytes..(e + 1) * row_bytes];
            let mut out = vec![0.0; len];
            dequantize_row(tensor.dtype, bytes, &mut out)
                .map_err(|err| anyhow::anyhow!("{}: {err}", spec.name))?;
            Ok(out)
        };
        let expert = |e: usize| -> anyhow::Result<Expert> {
            let part = |proj: ExpertProj, rows: usize, cols: usize| {
                let tensor = weights.expert(layer, proj, e)?;
                checked(
                    &tensor,
                    &format!("blk.{layer}.{proj} expert {e}"),
                    rows,
                    cols,
                )
            };
            let biases = match moe.biases {
                false => None,
                true => Some([
                    bias_row(LayerTensor::FfnGateExpsBias, e)?,
                    bias_row(LayerTensor::FfnUpExpsBias, e)?,
                    bias_row(LayerTensor::FfnDownExpsBias, e)?,
                ]),
            };
            Ok(Expert {
                gate: part(ExpertProj::Gate, inter, hidden)?,
                up: part(ExpertProj::Up, inter, hidden)?,
                down: part(ExpertProj::Down, hidden, inter)?,
                biases,
            })
        };
        let shared = match moe.shared_expert_intermediate_size {
            None => None,
            Some(_) => Some(SharedExpert {
                mlp: Expert {
                    gate: planned(LayerTensor::FfnGateShexp)?,
                    up: planned(LayerTensor::FfnUpShexp)?,
                    down: planned(LayerTensor::FfnDownShexp)?,
                    biases: None,
                },
                gate: planned(LayerTensor::FfnGateInpShexp)?,
            }),
        };
        Ok(MoeWeights {
            router: planned(LayerTensor::FfnGateInp)?,
            router_bias: match moe.biases {
                false => None,
                // `[experts]`: one row.
                true => Some(bias_row(LayerTensor::FfnGateInpBias, 0)?),
            },
            experts_per_token: moe.experts_per_token,
            norm_topk_prob: moe.norm_topk_prob,
            experts: (0..moe.num_experts)
                .map(expert)
                .collect::<anyhow::Result<_>>()?,
            shared,
            expert_scale: None,
        })
    }

    /// The router's, the experts' and the shared expert's matrices.
    pub fn matrices_mut(&mut self) -> Vec<&mut QuantMatrix> {
        let mut all = vec![&mut self.router];
        for e in &mut self.experts {
            all.extend([&mut e.gate, &mut e.up, &mut e.down]);
        }
        if let Some(SharedExpert { mlp, gate }) = &mut self.shared {
            all.extend([&mut mlp.gate, &mut mlp.up, &mut mlp.down, gate]);
        }
        all
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let expert = |e: &Expert| e.gate.bytes().len() + e.up.bytes().len() + e.down.bytes().len();
        self.router.bytes().len()
            + self.experts.iter().map(expert).sum::<usize>()
            + self
                .shared
                .as_ref()
                .map_or(0, |s| expert(&s.mlp) + s.gate.bytes().len())
    }
}
