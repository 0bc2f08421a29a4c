//! The model's weights on the device, in one allocation. Matrices are bf16 (BF16 stored as is,
//! F16/F32 and the GGUF types without device kernels widened at load), or kept in their GGUF
//! block format (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K: crate::quant), so a quantized file
//! takes its own size on the device. Norm weights and biases are f32. Q/K/V form one linear
//! layer and gate/up another (crate::linear), each part in its file tensor's format (arena.rs).
//! The tensors, their names and shapes come from the layer plan (ferrite_model::plan), and
//! each layer's weights carry its spec into the forward pass. Norm weights get the plan's
//! `weight_offset` added at load (gemma's `x * (1 + w)`), and each attention layer gets its
//! RoPE frequencies from its spec.
//! `--load-format dummy` draws bf16 weights directly on the device with the same formula as
//! the host generator (ferrite_model::dummy), without materialising them on the host.
//! `FERRITE_CUDA_WIDEN_QUANT=1` widens quantized files (matrices and expert stacks) to bf16 as
//! before (for A/B timing).

mod arena;
mod assemble;
mod eagle3;
mod moe;
mod upload;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::Activation;
use ferrite_model::dummy::{mtp_inits, plan_inits};
use ferrite_model::plan::{
    self, AttentionSpec, LinearAttentionSpec, ModelPlan, MtpSpec, NormSpec, TensorRole,
};
use ferrite_model::weights as host;

use crate::buffer::{upload, DeviceBuffer};
use crate::device_ptr::DevicePtr;
use crate::launchers::{DummyFormat, ExpertFormat, Kernels, FP8_BLOCK};
use crate::linear::{Linear, Matrix, MatrixFormat};
use crate::quant::QuantType;
use arena::Arena;
pub use eagle3::Eagle3Weights;
pub use moe::{MoeBiases, MoeWeights, SharedExpertWeights};
use upload::{upload_matrix, upload_vector};

/// Where a backend's weights come from.
pub enum WeightSource {
    /// Loaded on the host (GGUF or safetensors), any dtype the dequantizer knows.
    Host(host::ModelWeights),
    /// `--load-format dummy` with this seed, drawn on the device.
    Dummy { seed: u64 },
}

/// One layer's weights on the device, as its `LayerSpec` describes it.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// The norm before the mixer.
    pub attn_norm: DevicePtr,
    pub mixer: Mixer,
    pub ffn_norm: DevicePtr,
    pub mlp: Mlp,
    /// Norms of the mixer and MLP outputs, f32 [hidden] each (`LayerSpec::post_norms`).
    pub post_norms: Option<PostNormWeights>,
}

/// A layer's mixer, one variant per `plan::Mixer`.
#[derive(Debug, Clone)]
pub enum Mixer {
    Attention(Box<AttentionWeights>),
    LinearAttention(Box<LinearAttentionWeights>),
}

/// Gated DeltaNet linear attention: its spec and device tensors.
#[derive(Debug, Clone)]
pub struct LinearAttentionWeights {
    pub spec: LinearAttentionSpec,
    /// [conv_channels + value_dim + 2 value_heads, hidden]: q, k, v rows (convolved), then z,
    /// beta and alpha rows.
    pub w_in: Linear,
    /// f32 [conv_channels, taps], f32 [value_heads] twice (dt_bias, A), f32 [value_head_dim].
    pub conv: DevicePtr,
    pub dt_bias: DevicePtr,
    pub decay_rate: DevicePtr,
    pub norm: DevicePtr,
    pub w_out: Linear,
    /// Floats from a state slot's start to this layer's state (its convolution's, then S).
    pub state_offset: usize,
}

/// Softmax attention: its spec (heads, window, scale, RoPE style) and its device tensors.
#[derive(Debug, Clone)]
pub struct AttentionWeights {
    pub spec: AttentionSpec,
    /// [q_dim + 2 kv_dim (+ q_dim), hidden]: Q rows, then K, then V (then gated attention's
    /// output gate).
    pub wqkv: Linear,
    /// [q_dim + 2 kv_dim] f32; `None` without QKV bias.
    pub bqkv: Option<DevicePtr>,
    /// Per-head RMSNorm weights of Q and K, f32 [head_dim] each.
    pub qk_norm: Option<QkNormWeights>,
    pub wo: Linear,
    /// The output projection's bias, f32 [hidden] (gpt-oss).
    pub bo: Option<DevicePtr>,
    /// gpt-oss's attention sinks, f32 [num_heads].
    pub sinks: Option<DevicePtr>,
    /// This layer's RoPE inverse frequencies, f32 [rotary_dim / 2].
    pub inv_freq: DevicePtr,
}

/// A layer's MLP, one variant per `plan::MlpSpec`.
#[derive(Debug, Clone)]
pub enum Mlp {
    /// [2 inter, hidden] gate rows then up rows; [hidden, inter].
    Dense {
        activation: Activation,
        gate_up: Linear,
        down: Linear,
    },
    Sparse(Box<MoeWeights>),
}

#[derive(Debug, Clone, Copy)]
pub struct QkNormWeights {
    pub q: DevicePtr,
    pub k: DevicePtr,
}

#[derive(Debug, Clone, Copy)]
pub struct PostNormWeights {
    pub attention: DevicePtr,
    pub mlp: DevicePtr,
}

/// The model's weights on the device (the CPU backend's counterpart has the same name).
pub struct ModelWeights {
    arena: DeviceBuffer,
    /// The token embedding table [vocab, hidden].
    pub embed: Matrix,
    pub layers: Vec<LayerWeights>,
    pub output_norm: DevicePtr,
    /// Every RMSNorm's epsilon (its weight offset is folded into the weights at load).
    pub norm: NormSpec,
    /// Token embeddings are multiplied by this.
    pub embedding_scale: f32,
    /// The output projection [vocab, hidden] (the embedding when tied).
    pub lm_head: Linear,
    /// Bytes of the largest quantized matrix dequantized at once (0 when nothing is
    /// quantized): what the cuBLAS path's scratch buffer needs.
    pub largest_quantized: usize,
    /// f32 values of one sequence's recurrent state over every linear-attention layer (0
    /// without them).
    pub state_len: usize,
    /// The multi-token-prediction layer, when the source has one.
    pub mtp: Option<MtpWeights>,
}

/// A multi-token-prediction layer (`plan::MtpSpec` has the math): its input projection and
/// norms, its decoder layer (KV-cache layer `index`), its output norm.
#[derive(Debug, Clone)]
pub struct MtpWeights {
    pub index: usize,
    /// [hidden, 2 hidden]: over [enorm(embedding); hnorm(hidden state)].
    pub eh_proj: Linear,
    pub enorm: DevicePtr,
    pub hnorm: DevicePtr,
    pub head_norm: DevicePtr,
    pub layer: LayerWeights,
}

/// How a file tensor is kept on the device.
fn device_format(tensor: &host::WeightTensor, k: usize, widen: bool) -> MatrixFormat {
    match QuantType::of(tensor.dtype) {
        Some(q) if q.fits(k) && !widen => MatrixFormat::Quant(q),
        _ => MatrixFormat::Bf16,
    }
}

/// What loading adds to a tensor stored in f32: the norm weight offset to norm weights
/// (gemma's `1 + w`, folded so that the kernels compute `x * w` for every family).
fn shift_of(plan: &ModelPlan, role: TensorRole) -> f32 {
    match role {
        TensorRole::Norm => plan.norm.weight_offset,
        TensorRole::Matrix | TensorRole::Bias | TensorRole::Scale | TensorRole::DecayRate => 0.0,
    }
}

impl ModelWeights {
    /// Every tensor of `model` and of its multi-token-prediction layer `mtp` (when the
    /// source has one), from `source`.
    pub fn load(
        stream: &Arc<CudaStream>,
        kernels: &Kernels,
        model: &ModelPlan,
        mtp: Option<&MtpSpec>,
        source: &WeightSource,
    ) -> anyhow::Result<ModelWeights> {
        let widen = std::env::var("FERRITE_CUDA_WIDEN_QUANT").is_ok_and(|v| v == "1");
        // The MTP layer is placed as one more layer of the plan, its projection and norms
        // beside it.
        let mut placed = model.clone();
        let mut outer = Vec::new();
        if let Some(mtp) = mtp {
            placed.layers.push(mtp.layer.clone());
            outer = mtp.outer_tensors();
        }
        let plan = match source {
            // Dummy weights are bf16 throughout (MXFP4 experts too).
            WeightSource::Dummy { .. } => {
                Arena::new(&placed, &outer, &|_, _| MatrixFormat::Bf16, &|_| {
                    ExpertFormat::Bf16
                })?
            }
            WeightSource::Host(weights) => Arena::new(
                &placed,
                &outer,
                &|name, k| {
                    weights
                        .get(name)
                        .map_or(MatrixFormat::Bf16, |t| device_format(t, k, widen))
                },
                &|name| moe::stack_format(weights, name, widen),
            )?,
        };
        let arena = DeviceBuffer::new(stream, plan.layout.bytes())?;
        let seed = match source {
            WeightSource::Dummy { seed } => *seed,
            WeightSource::Host(_) => 0, // only the names and shapes are used
        };
        let mtp_tensors = mtp.map(|m| mtp_inits(model, m, seed)).unwrap_or_default();
        for init in plan_inits(model, seed).into_iter().chain(mtp_tensors) {
            let shift = shift_of(model, init.role);
            if let Some(at) = plan.experts.get(&init.name) {
                let stack = at.on(&arena);
                match source {
                    WeightSource::Dummy { .. } => kernels.dummy_fill(
                        stack.values,
                        init.len(),
                        init.key,
                        init.scale,
                        init.offset,
                        DummyFormat::Bf16,
                    )?,
                    WeightSource::Host(weights) => {
                        moe::upload_stack(stream, stack, &init.name, &init.shape, weights)?
                    }
                }
                continue;
            }
            if let Some(slot) = plan.matrices.get(&init.name) {
                let linear = &plan.linears[&slot.linear];
                let part = &linear.parts[slot.part];
                match source {
                    WeightSource::Dummy { .. } => {
                        let dst = arena.at(part.planes[0] + slot.row_in_part * linear.k * 2);
                        let (key, scale, offset) = (init.key, init.scale, init.offset);
                        kernels.dummy_fill(
                            dst,
                            init.len(),
                            key,
                            scale,
                            offset,
                            DummyFormat::Bf16,
                        )?;
                    }
                    WeightSource::Host(weights) => {
                        let tensor = weights.get(&init.name)?;
                        check_shape(&init.name, tensor, &init.shape)?;
                        let planes: Vec<DevicePtr> =
                            part.planes.iter().map(|&at| arena.at(at)).collect();
                        upload_matrix(stream, &planes, part.format, slot.row_in_part, tensor)?;
                    }
                }
                continue;
            }
            let at = plan
                .vector_slot(&placed, &init.name)
                .ok_or_else(|| anyhow::anyhow!("no place for `{}`", init.name))?;
            match source {
                WeightSource::Dummy { .. } => {
                    let format = DummyFormat::F32 { shift };
                    kernels.dummy_fill(
                        arena.at(at),
                        init.len(),
                        init.key,
                        init.scale,
                        init.offset,
                        format,
                    )?;
                }
                WeightSource::Host(weights) => {
                    let tensor = weights.get(&init.name)?;
                    check_shape(&init.name, tensor, &init.shape)?;
                    upload_vector(stream, arena.at(at), tensor, shift)?;
                }
            }
        }
        for layer in &placed.layers {
            match &layer.mixer {
                plan::Mixer::Attention(a) => {
                    let at = plan.vectors[&format!("blk.{}.rope_inv_freq", layer.index)];
                    upload(stream, arena.at(at), &a.rope.inv_freq)?;
                }
                plan::Mixer::LinearAttention(_) => {}
            }
        }
        // FP8 matrices' scales block-major too (crate::fp8_gemm reads them so).
        for lp in plan.linears.values() {
            for p in &lp.parts {
                if p.format == MatrixFormat::Quant(QuantType::Fp8) {
                    let (by_row, by_k) = (arena.at(p.planes[0]), arena.at(p.planes[2]));
                    kernels.fp8_scales_by_k(by_row, by_k, p.rows, lp.k / FP8_BLOCK)?;
                }
            }
        }
        stream.synchronize()?;
        assemble::model_weights(model, mtp, &plan, arena)
    }

    pub fn bytes(&self) -> usize {
        self.arena.bytes()
    }
}

fn check_shape(name: &str, tensor: &host::WeightTensor, shape: &[usize]) -> anyhow::Result<()> {
    let numel: usize = tensor.shape.iter().product();
    let want: usize = shape.iter().product();
    let rows_ok = shape.len() == 1 || tensor.rows() == shape[0];
    if numel != want || !rows_ok {
        anyhow::bail!(
            "`{name}` has shape {:?}, the config says {shape:?}",
            tensor.shape
        );
    }
    Ok(())
}
