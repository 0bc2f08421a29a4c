//! An EAGLE-3 draft head on the CPU (`plan::Eagle3Spec` has the math): its weights and its
//! one pass over pairs (token `p + 1`, `g` at `p`) written at position `p` of its own K/V.
//! `draft_head.rs` keeps the rows `g` (`fc` over the target's captured layer inputs, or the
//! head's own output) and runs the pass after each target step and for the draft steps.

use ferrite_engine::{BackendError, SeqBatch};
use ferrite_model::load::Eagle3Head;
use ferrite_model::plan::{eagle3 as names, Eagle3Spec, Mixer};

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
pub struct Eagle3Weights {
    pub spec: Eagle3Spec,
    fc: QuantMatrix,
    hidden_norm: Vec<f32>,
    output_norm: Vec<f32>,
    layer: LayerWeights,
    /// Its own LM head over the draft vocabulary (`None`: the target's, over the whole).
    lm_head: Option<QuantMatrix>,
    /// Its own token embedding (`None`: the target's).
    embedding: Option<QuantMatrix>,
    draft_to_target: Vec<u32>,
}

impl Eagle3Weights {
    pub fn load(head: &Eagle3Head) -> anyhow::Result<Eagle3Weights> {
        let spec = head.spec.clone();
        let (weights, offset) = (&head.weights, spec.norm.weight_offset);
        let hidden = spec.hidden_size();
        let vector = |name: &str| norm(weights, name, hidden, offset);
        let reader = LayerReader {
            weights,
            spec: &spec.layer,
            norm_offset: offset,
        };
        let target_width = 3 * spec.options.target_hidden;
        let (vocab, draft_vocab) = (spec.vocab_size, spec.options.draft_vocab);
        Ok(Eagle3Weights {
            fc: load_matrix(weights, names::FC, hidden, target_width)?,
            hidden_norm: vector(names::HIDDEN_NORM)?,
            output_norm: vector(names::OUTPUT_NORM)?,
            layer: reader.layer()?,
            lm_head: head
                .own_head
                .then(|| load_matrix(weights, names::OUTPUT, draft_vocab, hidden))
                .transpose()?,
            embedding: head
                .own_embedding
                .then(|| load_matrix(weights, names::TOKEN_EMBD, vocab, hidden))
                .transpose()?,
            draft_to_target: head.draft_to_target.clone(),
            spec,
        })
    }

    /// The K/V geometry of its attention.
    pub fn kv_shape(&self) -> KvShape {
        match &self.spec.layer.mixer {
            Mixer::Attention(a) => KvShape::of(a),
            Mixer::LinearAttention(_) => unreachable!("Eagle3Spec::new checks for attention"),
        }
    }

    pub(crate) fn fc(&self) -> &QuantMatrix {
        &self.fc
    }

    /// Width of a row `fc` reads: three target hidden states.
    pub(crate) fn fc_width(&self) -> usize {
        3 * self.spec.options.target_hidden
    }
}

impl Model {
    /// One pass of the head over `batch` (each sequence's tokens are its pairs' tokens,
    /// `start_pos` the first pair's position) with one row `g` per token: writes the head's
    /// K/V; with `logits`, runs it whole and returns the rows the next step continues from and
    /// their logits over the target's vocabulary (-inf outside the draft vocabulary).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn eagle3_pass(
        &self,
        isa: Isa,
        head: &Eagle3Weights,
        kv: &mut KvCache,
        batch: &[SeqBatch<'_>],
        g_rows: &[f32],
        logits: bool,
        ws: &mut Workspace,
    ) -> Result<(Vec<f32>, Vec<f32>), BackendError> {
        let hidden = self.config().hidden_size;
        let eps = head.spec.norm.eps;
        let tokens = pass_tokens(batch);
        let n = tokens.len();
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        // What the attention reads: [input_norm(embed(token)); hidden_norm(g)].
        let embedding = head.embedding.as_ref().unwrap_or(self.embedding());
        let mut input = vec![0.0f32; n * 2 * hidden];
        let mut row = vec![0.0f32; hidden];
        for (i, &(b, pos)) in tokens.iter().enumerate() {
            let token = batch[b].tokens[pos - batch[b].start_pos] as usize;
            embedding.dequantize_rows(token, 1, &mut row);
            let out = &mut input[i * 2 * hidden..(i + 1) * 2 * hidden];
            rms_norm(isa, &row, &head.layer.attn_norm, eps, &mut out[..hidden]);
            let g = &g_rows[i * hidden..(i + 1) * hidden];
            rms_norm(isa, g, &head.hidden_norm, eps, &mut out[hidden..]);
        }
        let mut x = match head.spec.options.residual_normed {
            true => input
                .chunks_exact(2 * hidden)
                .flat_map(|r| &r[hidden..])
                .copied()
                .collect(),
            false => g_rows[..n * hidden].to_vec(),
        };
        let layer = (&head.spec.layer, &head.layer);
        self.head_layer(
            isa,
            layer,
            kv,
            batch,
            &tokens,
            &mut x,
            Some(&input),
            logits,
            ws,
        )?;
        if !logits {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut normed = vec![0.0f32; n * hidden];
        for (dst, src) in normed.chunks_exact_mut(hidden).zip(x.chunks_exact(hidden)) {
            rms_norm(isa, src, &head.output_norm, eps, dst);
        }
        let vocab = self.logits_vocab();
        let mut logits = vec![f32::NEG_INFINITY; n * vocab];
        match &head.lm_head {
            None => matmul(isa, &normed, n, self.lm_head(), &mut logits),
            Some(lm_head) => {
                let draft_vocab = lm_head.rows();
                let mut draft = vec![0.0f32; n * draft_vocab];
                matmul(isa, &normed, n, lm_head, &mut draft);
                for (full, draft) in logits
                    .chunks_exact_mut(vocab)
                    .zip(draft.chunks(draft_vocab))
                {
                    for (&id, &l) in head.draft_to_target.iter().zip(draft) {
                        // (ids past a limited logits vocabulary are not scored at all)
                        if let Some(slot) = full.get_mut(id as usize) {
                            *slot = l;
                        }
                    }
                }
            }
        }
        let fed = if head.spec.options.feed_normed {
            normed
        } else {
            x
        };
        Ok((fed, logits))
    }
}
