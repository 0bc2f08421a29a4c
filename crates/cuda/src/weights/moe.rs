//! A mixture-of-experts layer's weights on the device: the router and qwen2_moe's shared
//! expert as linear layers, and the experts as three bf16 stacks `[experts, rows, cols]`
//! (gate, up, down) that one launch indexes by expert (kernels/moe.cu). Quantized GGUF
//! experts are widened to bf16 at load: the expert kernels read bf16 only.

use cudarc::driver::CudaStream;
use ferrite_model::config::{Activation, MoeConfig};
use ferrite_model::weights::{ModelWeights as HostWeights, WeightTensor};

use super::upload::upload_matrix;
use crate::device_ptr::DevicePtr;
use crate::linear::{Linear, MatrixFormat};
use ferrite_model::tensor_names::{ExpertProj, LayerTensor};

#[derive(Debug, Clone)]
pub struct MoeWeights {
    /// [experts, hidden], bf16.
    pub router: Linear,
    /// bf16 [experts, width, hidden] (gate and up) and [experts, hidden, width] (down).
    pub gate: DevicePtr,
    pub up: DevicePtr,
    pub down: DevicePtr,
    pub experts: usize,
    pub experts_per_token: usize,
    /// Each expert's intermediate width.
    pub width: usize,
    pub norm_topk_prob: bool,
    pub shared: Option<SharedExpertWeights>,
    /// The shared expert's activation (the routed experts' kernels apply SwiGLU:
    /// launchers::supports).
    pub activation: Activation,
}

/// qwen2_moe's shared expert: a dense SwiGLU MLP on every token, scaled by sigmoid(gate · x).
#[derive(Debug, Clone)]
pub struct SharedExpertWeights {
    /// [2 width, hidden]; [hidden, width]; [1, hidden] (bf16).
    pub gate_up: Linear,
    pub down: Linear,
    pub gate: Linear,
    pub width: usize,
}

impl MoeWeights {
    /// Layer `layer`'s weights from the arena: `linear` finds a planned linear layer by name,
    /// `stack` an expert stack by file tensor name.
    pub(super) fn assemble(
        moe: &MoeConfig,
        activation: Activation,
        layer: usize,
        linear: &dyn Fn(&str) -> anyhow::Result<Linear>,
        stack: &dyn Fn(&str) -> anyhow::Result<DevicePtr>,
    ) -> anyhow::Result<MoeWeights> {
        let n = |p: &str| format!("blk.{layer}.{p}");
        let shared = match moe.shared_expert_intermediate_size {
            None => None,
            Some(width) => Some(SharedExpertWeights {
                gate_up: linear(&n("ffn_shexp_gate_up"))?,
                down: linear(&n("ffn_down_shexp"))?,
                gate: linear(&n("ffn_gate_inp_shexp"))?,
                width,
            }),
        };
        Ok(MoeWeights {
            router: linear(&n("ffn_gate_inp"))?,
            gate: stack(&LayerTensor::FfnGateExps.of(layer))?,
            up: stack(&LayerTensor::FfnUpExps.of(layer))?,
            down: stack(&LayerTensor::FfnDownExps.of(layer))?,
            experts: moe.num_experts,
            experts_per_token: moe.experts_per_token,
            width: moe.expert_intermediate_size,
            norm_topk_prob: moe.norm_topk_prob,
            shared,
            activation,
        })
    }
}

/// The expert stack `name` (`blk.{layer}.{proj}_exps.weight`, `[experts, rows, cols]`) into
/// `dst` as bf16: in one piece from a stacked file tensor (GGUF), else expert by expert from
/// the per-expert tensors a Hugging Face checkpoint has.
pub(super) fn upload_stack(
    stream: &CudaStream,
    dst: DevicePtr,
    name: &str,
    shape: &[usize],
    weights: &HostWeights,
) -> anyhow::Result<()> {
    let [experts, rows, cols] = shape[..] else {
        anyhow::bail!("expert stack `{name}` has shape {shape:?}, expected 3 dimensions");
    };
    if let Some(stacked) = weights.tensors.get(name) {
        anyhow::ensure!(
            stacked.shape == shape,
            "`{name}` has shape {:?}, the config says {shape:?}",
            stacked.shape
        );
        let as_matrix = WeightTensor {
            dtype: stacked.dtype,
            shape: vec![experts * rows, cols],
            storage: stacked.storage.clone(),
        };
        return upload_matrix(stream, &[dst], MatrixFormat::Bf16, 0, &as_matrix);
    }
    let (layer, proj) = name
        .strip_prefix("blk.")
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(l, p)| {
            let proj = ExpertProj::ALL
                .into_iter()
                .find(|proj| proj.stacked().suffix() == p)?;
            Some((l.parse::<usize>().ok()?, proj))
        })
        .ok_or_else(|| anyhow::anyhow!("`{name}` is not an expert stack name"))?;
    for e in 0..experts {
        let tensor = weights.expert(layer, proj, e)?;
        anyhow::ensure!(
            tensor.rows() == rows && tensor.cols() == cols,
            "expert {e} of `{name}` is {:?}, the config says [{rows}, {cols}]",
            tensor.shape
        );
        upload_matrix(
            stream,
            &[dst.offset(e * rows * cols * 2)],
            MatrixFormat::Bf16,
            0,
            &tensor,
        )?;
    }
    Ok(())
}
