//! Gemma 4's experts beside the dense MLP (`plan::LayerSpec::experts_beside` says the math):
//! the router reads `rms_norm(x) · scale / sqrt(hidden)` of the residual stream `x`, the
//! experts `pre_norm_2(x)`; the MLP's and the experts' outputs are normed apart and summed.

use ferrite_model::config::Activation;
use ferrite_model::tensor_names::LayerTensor;

use super::{moe_mlp, MoeScratch, MoeWeights};
use crate::kernels::norm::rms_norm;
use crate::simd::Isa;
use crate::weight_reader::LayerReader;

#[derive(Debug)]
pub struct ExpertsBeside {
    pub moe: MoeWeights,
    pub activation: Activation,
    /// The router's input scale with its `1 / sqrt(hidden)` folded in.
    pub router_scale: Vec<f32>,
    /// The norm of the experts' input (`pre_feedforward_layernorm_2`).
    pub pre_norm: Vec<f32>,
    /// The norms of the MLP's output and of the experts' (`post_feedforward_layernorm_1/2`).
    pub post_norm_mlp: Vec<f32>,
    pub post_norm_experts: Vec<f32>,
}

/// Scratch, reused from step to step (only grows).
#[derive(Default)]
pub struct BesideScratch {
    router_x: Vec<f32>,
    experts_x: Vec<f32>,
    experts_out: Vec<f32>,
    mlp_out: Vec<f32>,
    moe: MoeScratch,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

impl ExpertsBeside {
    /// The layer's experts, `None` for a layer without experts beside its MLP.
    pub fn load(reader: &LayerReader<'_>) -> anyhow::Result<Option<Self>> {
        let Some(moe) = &reader.spec.experts_beside else {
            return Ok(None);
        };
        let mut weights = MoeWeights::new(reader.weights, reader.spec, moe)?;
        weights.expert_scale = Some(reader.vector(LayerTensor::FfnDownExpsScale)?);
        let hidden = reader.spec.hidden_size;
        let root = (hidden as f64).powf(-0.5) as f32;
        let router_scale = reader.vector(LayerTensor::FfnGateInpScale)?;
        let activation = match &reader.spec.mlp {
            ferrite_model::plan::MlpSpec::Gated { activation, .. }
            | ferrite_model::plan::MlpSpec::Experts { activation, .. } => *activation,
        };
        Ok(Some(ExpertsBeside {
            moe: weights,
            activation,
            router_scale: router_scale.iter().map(|s| s * root).collect(),
            pre_norm: reader.norm(LayerTensor::FfnPreNorm2)?,
            post_norm_mlp: reader.norm(LayerTensor::FfnPostNorm1)?,
            post_norm_experts: reader.norm(LayerTensor::FfnPostNorm2)?,
        }))
    }

    pub fn bytes(&self) -> usize {
        let vectors = self.router_scale.len()
            + self.pre_norm.len()
            + self.post_norm_mlp.len()
            + self.post_norm_experts.len();
        self.moe.bytes() + vectors * 4
    }

    /// `mlp_out = post_norm_1(mlp_out) + post_norm_2(experts(pre_norm_2(x)))` for `n` rows;
    /// `x` is the residual stream before the MLP.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        isa: Isa,
        x: &[f32],
        n: usize,
        eps: f32,
        scratch: &mut BesideScratch,
        mlp_out: &mut [f32],
        load: Option<&[std::sync::atomic::AtomicU64]>,
    ) {
        let hidden = self.pre_norm.len();
        let len = n * hidden;
        let router_x = sized(&mut scratch.router_x, len);
        rms_norm(isa, &x[..len], &self.router_scale, eps, router_x);
        let experts_x = sized(&mut scratch.experts_x, len);
        rms_norm(isa, &x[..len], &self.pre_norm, eps, experts_x);
        let experts_out = sized(&mut scratch.experts_out, len);
        moe_mlp(
            isa,
            &self.moe,
            self.activation,
            router_x,
            experts_x,
            n,
            &mut scratch.moe,
            experts_out,
            load,
        );
        let normed_mlp = sized(&mut scratch.mlp_out, len);
        rms_norm(isa, &mlp_out[..len], &self.post_norm_mlp, eps, normed_mlp);
        rms_norm(
            isa,
            experts_out,
            &self.post_norm_experts,
            eps,
            &mut mlp_out[..len],
        );
        for (o, m) in mlp_out[..len].iter_mut().zip(normed_mlp.iter()) {
            *o += m;
        }
    }
}
