//! A mixture-of-experts layer's weights on the device: the router and qwen2_moe's shared
//! expert as linear layers, and the experts as three stacks `[experts, rows, cols]` (gate,
//! up, down) that one launch indexes by expert (kernels/moe_experts.cu). MXFP4 experts
//! (gpt-oss) stay MXFP4, cut into a code plane and an exponent plane; GGUF experts of the
//! block types with expert kernels (Q8_0, Q4_K, Q5_K, Q6_K) stay in their blocks, cut into
//! crate::quant's planes; other quantized ones are widened to bf16 at load. gpt-oss's router
//! and expert biases are f32 vectors.

use cudarc::driver::CudaStream;
use ferrite_model::config::{Activation, MoeConfig, CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT};
use ferrite_model::weights::{DType, ModelWeights as HostWeights, WeightTensor};

use super::upload::upload_matrix;
use crate::buffer::upload;
use crate::device_ptr::DevicePtr;
use crate::launchers::{ExpertActivation, ExpertFormat, ExpertMatrix};
use crate::linear::{Linear, MatrixFormat};
use ferrite_model::tensor_names::{ExpertProj, LayerTensor};

#[derive(Debug, Clone)]
pub struct MoeWeights {
    /// [experts, hidden], bf16.
    pub router: Linear,
    /// [experts, width, hidden] (gate and up) and [experts, hidden, width] (down).
    pub gate: ExpertMatrix,
    pub up: ExpertMatrix,
    pub down: ExpertMatrix,
    /// gpt-oss's biases, f32: the router's [experts], gate's and up's [experts, width],
    /// down's [experts, hidden].
    pub biases: Option<MoeBiases>,
    pub experts: usize,
    pub experts_per_token: usize,
    /// Each expert's intermediate width.
    pub width: usize,
    pub norm_topk_prob: bool,
    pub shared: Option<SharedExpertWeights>,
    /// The shared expert's activation.
    pub activation: Activation,
    /// The routed experts' (SwiGLU or clamped SwiGLU: launchers::supports).
    pub expert_activation: ExpertActivation,
}

#[derive(Debug, Clone, Copy)]
pub struct MoeBiases {
    pub router: DevicePtr,
    pub gate: DevicePtr,
    pub up: DevicePtr,
    pub down: DevicePtr,
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
    /// `stack` an expert stack by file tensor name, `vector` an f32 vector.
    pub(super) fn assemble(
        moe: &MoeConfig,
        activation: Activation,
        layer: usize,
        linear: &dyn Fn(&str) -> anyhow::Result<Linear>,
        stack: &dyn Fn(&str) -> anyhow::Result<ExpertMatrix>,
        vector: &dyn Fn(&str) -> anyhow::Result<DevicePtr>,
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
            expert_activation: match activation {
                Activation::ClampedSwiglu => ExpertActivation::Clamped {
                    alpha: CLAMPED_SWIGLU_ALPHA,
                    limit: CLAMPED_SWIGLU_LIMIT,
                },
                _ => ExpertActivation::Swiglu,
            },
            biases: if moe.biases {
                let v = |t: LayerTensor| vector(&t.of(layer));
                Some(MoeBiases {
                    router: v(LayerTensor::FfnGateInpBias)?,
                    gate: v(LayerTensor::FfnGateExpsBias)?,
                    up: v(LayerTensor::FfnUpExpsBias)?,
                    down: v(LayerTensor::FfnDownExpsBias)?,
                })
            } else {
                None
            },
        })
    }
}

/// How stack `name` of `weights` is kept on the device (`widen`: block types as bf16 all the
/// same). gate and up run in one kernel, which reads both in one format: when their files'
/// types differ, both are widened to bf16.
pub(super) fn stack_format(weights: &HostWeights, name: &str, widen: bool) -> ExpertFormat {
    let format = |name: &str| {
        let dtype = weights.tensors.get(name).map(|t| t.dtype);
        dtype.map_or(ExpertFormat::Bf16, |d| ExpertFormat::for_file(d, widen))
    };
    let (gate, up) = (
        LayerTensor::FfnGateExps.suffix(),
        LayerTensor::FfnUpExps.suffix(),
    );
    let sibling = if name.ends_with(gate) {
        Some(name.replace(gate, up))
    } else if name.ends_with(up) {
        Some(name.replace(up, gate))
    } else {
        None
    };
    match sibling {
        Some(other) if format(&other) != format(name) => ExpertFormat::Bf16,
        _ => format(name),
    }
}

/// A stacked MXFP4 tensor (17-byte blocks: exponent, 16 code bytes) into its two planes.
fn upload_mxfp4(
    stream: &CudaStream,
    planes: [DevicePtr; 2],
    name: &str,
    tensor: &WeightTensor,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        tensor.dtype == DType::Mxfp4,
        "`{name}` is {:?}, planned as an MXFP4 stack",
        tensor.dtype
    );
    let elements: usize = tensor.shape.iter().product();
    let blocks = elements / 32;
    let bytes = &tensor.storage.bytes()[..blocks * 17];
    let mut codes = Vec::with_capacity(blocks * 16);
    let mut exponents = Vec::with_capacity(blocks);
    for block in bytes.chunks_exact(17) {
        exponents.push(block[0]);
        codes.extend_from_slice(&block[1..]);
    }
    upload(stream, planes[0], &codes)?;
    upload(stream, planes[1], &exponents)?;
    // The vectors are host memory the copies read from until the stream gets there.
    stream.synchronize()?;
    Ok(())
}

/// The expert stack `name` (`blk.{layer}.{proj}_exps.weight`, `[experts, rows, cols]`) into
/// `dst`: in one piece from a stacked file tensor (GGUF, gpt-oss), else expert by expert from
/// the per-expert tensors a Hugging Face checkpoint has (bf16 stacks only).
pub(super) fn upload_stack(
    stream: &CudaStream,
    dst: ExpertMatrix,
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
        if let (ExpertFormat::Mxfp4, Some(exponents)) = (dst.format, dst.second_plane) {
            return upload_mxfp4(stream, [dst.values, exponents], name, stacked);
        }
        let as_matrix = WeightTensor {
            dtype: stacked.dtype,
            shape: vec![experts * rows, cols],
            storage: stacked.storage.clone(),
        };
        let format = match dst.format {
            ExpertFormat::Quant(q) => MatrixFormat::Quant(q),
            _ => MatrixFormat::Bf16,
        };
        let planes: Vec<DevicePtr> = [Some(dst.values), dst.second_plane]
            .into_iter()
            .flatten()
            .collect();
        return upload_matrix(stream, &planes, format, 0, &as_matrix);
    }
    anyhow::ensure!(
        dst.format == ExpertFormat::Bf16,
        "`{name}`: per-expert tensors are uploaded as bf16 only"
    );
    let dst = dst.values;
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
