//! Gemma 4's per-layer inputs (PLE, `plan::PerLayerInputSpec` says the math): once per step,
//! every token's `[layers, width]` inputs from its id and its scaled embedding; in each layer,
//! after the MLP, `x += post_norm(proj(gelu_tanh(inp_gate · x) * input_l))`.

use ferrite_model::config::Activation;
use ferrite_model::plan::{MlpSpec, ModelPlan, PerLayerInputSpec};
use ferrite_model::tensor_names::{
    LayerTensor, PER_LAYER_MODEL_PROJ, PER_LAYER_PROJ_NORM, PER_LAYER_TOKEN_EMBD,
};
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::kernels::activation::gated;
use crate::kernels::matmul::matmul;
use crate::kernels::norm::rms_norm_in_place;
use crate::kernels::quant_matrix::{load_matrix, QuantMatrix};
use crate::simd::Isa;
use crate::weight_reader::{norm, LayerReader};

/// The model's tables: the per-layer embedding, the projection of the token embedding and
/// the norm of its per-layer slices.
#[derive(Debug)]
pub struct PerLayerTables {
    pub spec: PerLayerInputSpec,
    /// `[vocab, layers * width]`, looked up.
    pub embed: QuantMatrix,
    /// `[layers * width, hidden]`.
    pub proj: QuantMatrix,
    pub norm: Vec<f32>,
}

/// One layer's gate `[width, hidden]`, projection `[hidden, width]` and output norm.
#[derive(Debug)]
pub struct PerLayerWeights {
    pub gate: QuantMatrix,
    pub proj: QuantMatrix,
    pub post_norm: Vec<f32>,
    /// The model's activation (transformers' `hidden_activation`, as the MLP's).
    pub activation: Activation,
}

/// Scratch, reused from step to step (only grows).
#[derive(Default)]
pub struct PerLayerScratch {
    ids: Vec<u32>,
    projected: Vec<f32>,
    gate: Vec<f32>,
    input: Vec<f32>,
    out: Vec<f32>,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

impl PerLayerTables {
    /// The tables `plan` names, `None` for a model without per-layer inputs.
    pub fn load(plan: &ModelPlan, weights: &LoadedWeights) -> anyhow::Result<Option<Self>> {
        let Some(spec) = plan.per_layer_input else {
            return Ok(None);
        };
        let all = spec.layers * spec.width;
        Ok(Some(PerLayerTables {
            spec,
            embed: load_matrix(weights, PER_LAYER_TOKEN_EMBD, spec.vocab_size, all)?,
            proj: load_matrix(weights, PER_LAYER_MODEL_PROJ, all, plan.hidden_size)?,
            norm: norm(
                weights,
                PER_LAYER_PROJ_NORM,
                spec.width,
                plan.norm.weight_offset,
            )?,
        }))
    }

    pub fn bytes(&self) -> usize {
        self.embed.bytes().len() + self.proj.bytes().len() + self.norm.len() * 4
    }

    /// Floats of one token's inputs: every layer's.
    pub fn len(&self) -> usize {
        self.spec.layers * self.spec.width
    }

    /// Every token's inputs of every layer, `out`: `[n, layers * width]`. `tokens` are the
    /// step's token ids, `x0` their scaled embeddings (`[n, hidden]`).
    pub fn compute(
        &self,
        isa: Isa,
        tokens: impl Iterator<Item = u32>,
        x0: &[f32],
        eps: f32,
        scratch: &mut PerLayerScratch,
        out: &mut [f32],
    ) -> anyhow::Result<()> {
        scratch.ids.clear();
        scratch.ids.extend(tokens);
        let n = scratch.ids.len();
        let (width, all) = (self.spec.width, self.spec.layers * self.spec.width);
        let projected = sized(&mut scratch.projected, n * all);
        matmul(isa, x0, n, &self.proj, projected);
        // transformers multiplies by the Python floats hidden^-0.5, sqrt(width) and 2^-0.5,
        // each rounded to f32.
        let proj_scale = (self.proj.cols() as f64).powf(-0.5) as f32;
        projected.iter_mut().for_each(|v| *v *= proj_scale);
        rms_norm_in_place(isa, projected, &self.norm, eps);
        let embed_scale = (width as f64).sqrt() as f32;
        let combine = std::f64::consts::FRAC_1_SQRT_2 as f32;
        for ((&token, row), proj) in scratch
            .ids
            .iter()
            .zip(out.chunks_exact_mut(all))
            .zip(projected.chunks_exact(all))
        {
            let token = token as usize;
            anyhow::ensure!(
                token < self.spec.vocab_size,
                "token {token} is outside the per-layer vocabulary ({})",
                self.spec.vocab_size
            );
            self.embed.dequantize_rows(token, 1, row);
            for (v, p) in row.iter_mut().zip(proj) {
                *v = (p + *v * embed_scale) * combine;
            }
        }
        Ok(())
    }
}

impl PerLayerWeights {
    /// The layer's weights, `None` for a layer without a per-layer input.
    pub fn load(reader: &LayerReader<'_>) -> anyhow::Result<Option<Self>> {
        if reader.spec.per_layer_input.is_none() {
            return Ok(None);
        }
        Ok(Some(PerLayerWeights {
            gate: reader.matrix(LayerTensor::PerLayerInpGate)?,
            proj: reader.matrix(LayerTensor::PerLayerProj)?,
            post_norm: reader.norm(LayerTensor::PerLayerPostNorm)?,
            activation: match &reader.spec.mlp {
                MlpSpec::Gated { activation, .. } | MlpSpec::Experts { activation, .. } => {
                    *activation
                }
            },
        }))
    }

    pub fn bytes(&self) -> usize {
        self.gate.bytes().len() + self.proj.bytes().len() + self.post_norm.len() * 4
    }

    /// `x += post_norm(proj(act(gate · x) * input))` for the `n` rows of `x`, `inputs`
    /// being every layer's (`[n, layers * width]`) and `layer` this one.
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &self,
        isa: Isa,
        x: &mut [f32],
        inputs: &[f32],
        layer: usize,
        n: usize,
        eps: f32,
        scratch: &mut PerLayerScratch,
    ) {
        let (width, hidden) = (self.gate.rows(), self.gate.cols());
        let all = inputs.len() / n.max(1);
        let gate = sized(&mut scratch.gate, n * width);
        matmul(isa, x, n, &self.gate, gate);
        let input = sized(&mut scratch.input, n * width);
        for (dst, src) in input.chunks_exact_mut(width).zip(inputs.chunks_exact(all)) {
            dst.copy_from_slice(&src[layer * width..(layer + 1) * width]);
        }
        gated(self.activation, gate, input);
        let out = sized(&mut scratch.out, n * hidden);
        matmul(isa, gate, n, &self.proj, out);
        rms_norm_in_place(isa, out, &self.post_norm, eps);
        for (v, d) in x[..n * hidden].iter_mut().zip(out.iter()) {
            *v += d;
        }
    }
}
