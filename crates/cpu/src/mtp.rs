//! The multi-token-prediction (MTP) layer on the CPU (`plan::MtpSpec` has the math): its
//! weights and its one pass over pairs (token `p + 1`, the target's final hidden state at
//! `p`) written at position `p` of its own K/V. `draft_head.rs` keeps the hidden states and
//! runs the pass after each target step and for the draft steps.

use ferrite_engine::{BackendError, SeqBatch};
use ferrite_model::config::ModelConfig;
use ferrite_model::plan::{Mixer, ModelPlan, MtpSpec};
use ferrite_model::tensor_names::LayerTensor;
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::head_layer::pass_tokens;
use crate::kernels::matmul::matmul;
use crate::kernels::norm::rms_norm;
use crate::kernels::quant_matrix::{load_matrix, QuantMatrix};
use crate::kv_cache::{KvCache, KvShape};
use crate::model::{Model, Workspace};
use crate::model_weights::LayerWeights;
use crate::simd::Isa;
use crate::weight_reader::{norm, LayerReader};

#[derive(Debug)]
pub struct MtpWeights {
    pub spec: MtpSpec,
    eh_proj: QuantMatrix,
    enorm: Vec<f32>,
    hnorm: Vec<f32>,
    head_norm: Vec<f32>,
    layer: LayerWeights,
}

impl MtpWeights {
    /// The MTP layer of `config`'s model in `weights`; `None` when the checkpoint has none.
    pub fn load(
        config: &ModelConfig,
        plan: &ModelPlan,
        weights: &LoadedWeights,
    ) -> anyhow::Result<Option<MtpWeights>> {
        let Some(spec) = MtpSpec::of(config) else {
            return Ok(None);
        };
        let (l, hidden, offset) = (spec.index(), plan.hidden_size, plan.norm.weight_offset);
        if !weights
            .tensors
            .contains_key(&LayerTensor::NextnEhProj.of(l))
        {
            return Ok(None);
        }
        let vector = |t: LayerTensor| norm(weights, &t.of(l), hidden, offset);
        let reader = LayerReader {
            weights,
            spec: &spec.layer,
            norm_offset: offset,
        };
        Ok(Some(MtpWeights {
            eh_proj: load_matrix(weights, &LayerTensor::NextnEhProj.of(l), hidden, 2 * hidden)?,
            enorm: vector(LayerTensor::NextnEnorm)?,
            hnorm: vector(LayerTensor::NextnHnorm)?,
            head_norm: vector(LayerTensor::NextnSharedHeadNorm)?,
            layer: reader.layer()?,
            spec,
        }))
    }

    /// The K/V geometry of its attention.
    pub fn kv_shape(&self) -> KvShape {
        match &self.spec.layer.mixer {
            Mixer::Attention(a) => KvShape::of(a),
            Mixer::LinearAttention(_) => unreachable!("MtpSpec::of builds an attention layer"),
        }
    }
}

impl Model {
    /// One MTP pass over `batch` (each sequence's tokens are its pairs' tokens, `start_pos` the
    /// first pair's position) with one hidden row per token: writes the MTP's K/V; with
    /// `logits`, runs the whole layer and returns the output rows (after its head norm) and
    /// their logits, else stops there (all later queries read).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mtp_pass(
        &self,
        isa: Isa,
        mtp: &MtpWeights,
        kv: &mut KvCache,
        batch: &[SeqBatch<'_>],
        hidden_rows: &[f32],
        logits: bool,
        ws: &mut Workspace,
    ) -> Result<(Vec<f32>, Vec<f32>), BackendError> {
        let hidden = self.config().hidden_size;
        let eps = self.norm_eps();
        let tokens = pass_tokens(batch);
        let n = tokens.len();
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        // [enorm(embed(token)); hnorm(h)] per row, then the projection back to `hidden`.
        let mut both = vec![0.0f32; n * 2 * hidden];
        let mut row = vec![0.0f32; hidden];
        for (i, &(b, pos)) in tokens.iter().enumerate() {
            let token = batch[b].tokens[pos - batch[b].start_pos] as usize;
            self.embedding().dequantize_rows(token, 1, &mut row);
            let out = &mut both[i * 2 * hidden..(i + 1) * 2 * hidden];
            rms_norm(isa, &row, &mtp.enorm, eps, &mut out[..hidden]);
            let h = &hidden_rows[i * hidden..(i + 1) * hidden];
            rms_norm(isa, h, &mtp.hnorm, eps, &mut out[hidden..]);
        }
        let mut x = vec![0.0f32; n * hidden];
        matmul(isa, &both, n, &mtp.eh_proj, &mut x);
        let layer = (&mtp.spec.layer, &mtp.layer);
        self.head_layer(isa, layer, kv, batch, &tokens, &mut x, None, logits, ws)?;
        if !logits {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut out = vec![0.0f32; n * hidden];
        for (dst, src) in out.chunks_exact_mut(hidden).zip(x.chunks_exact(hidden)) {
            rms_norm(isa, src, &mtp.head_norm, eps, dst);
        }
        let mut logits = vec![0.0f32; n * self.logits_vocab()];
        matmul(isa, &out, n, self.lm_head(), &mut logits);
        Ok((out, logits))
    }
}
