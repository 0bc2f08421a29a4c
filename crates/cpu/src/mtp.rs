//! The multi-token-prediction (MTP) layer on the CPU (`plan::MtpSpec` has the math): its
//! weights, the target's final hidden states it continues from, and its one pass over pairs
//! (token `p + 1`, hidden state at `p`) written at position `p` of its own K/V (a KV-cache
//! layer after the decoder's, addressed by the sequence's pages).
//!
//! Two callers run the pass. After each target step, the catch-up: every pair the step made
//! known (a sequence's chunk `s..e` gives the pairs at `s - 1 ..= e - 2`, the first one from
//! the hidden state the sequence's previous step left), so the MTP's K/V follows the target's
//! (drafts' pairs included; a rejected draft's are overwritten when its position comes again).
//! Then the draft steps the proposer asks for (`Backend::mtp_draft`): the first from the
//! target's hidden state at the sequence's last computed position, each next from the MTP's
//! own output of the step before. Hidden states are kept per state slot (a Qwen3.5 sequence
//! always has one).

use ferrite_engine::{BackendError, LogitsRequest, MtpDraftStep, SeqBatch};
use ferrite_model::config::ModelConfig;
use ferrite_model::plan::{Mixer, ModelPlan, MtpSpec};
use ferrite_model::tensor_names::LayerTensor;
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::attention_layer::{write_kv, RopeTables, StepTokens};
use crate::kernels::matmul::matmul;
use crate::kernels::norm::rms_norm;
use crate::kernels::quant_matrix::{load_matrix, QuantMatrix};
use crate::kernels::rope;
use crate::kv_cache::{KvCache, KvShape};
use crate::model::{Model, Workspace};
use crate::model_weights::{LayerWeights, Mixer as LayerMixer};
use crate::simd::Isa;
use crate::weight_reader::{norm, LayerReader};

/// Most rows of a step kept per slot: a verification step's (the scored token and its
/// drafts); a longer step keeps its last row, all the next step can start from.
const KEPT_ROWS: usize = 64;

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
            Mixer::Attention(a) => KvShape {
                num_kv_heads: a.num_kv_heads,
                head_dim: a.head_dim,
                window: a.window,
            },
            Mixer::LinearAttention(_) => unreachable!("MtpSpec::of builds an attention layer"),
        }
    }
}

/// Hidden states kept per state slot between steps.
#[derive(Debug, Default)]
pub struct MtpState {
    /// The target's final hidden states of the slot's last step: the first position, rows.
    target: Vec<Option<(usize, Vec<f32>)>>,
    /// The MTP's own output of the slot's last draft step.
    own: Vec<Vec<f32>>,
}

impl MtpState {
    pub fn new(slots: usize) -> MtpState {
        MtpState {
            target: vec![None; slots],
            own: vec![Vec::new(); slots],
        }
    }

    /// The target's hidden state at `position` of `slot`, if its last step left it.
    fn target_at(&self, slot: usize, position: usize, hidden: usize) -> Option<&[f32]> {
        let (first, rows) = self.target.get(slot)?.as_ref()?;
        let i = position.checked_sub(*first)?;
        rows.get(i * hidden..(i + 1) * hidden)
    }
}

impl Model {
    /// One MTP pass over `batch` (each sequence's tokens are its pairs' tokens, `start_pos` the
    /// first pair's position) with one hidden row per token: writes the MTP's K/V; with
    /// `logits`, runs the whole layer and returns the output rows (after its head norm) and
    /// their logits, else stops there (all later queries read).
    fn mtp_pass(
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
        let tokens: Vec<(usize, usize)> = batch
            .iter()
            .enumerate()
            .flat_map(|(b, s)| (0..s.tokens.len()).map(move |i| (b, s.start_pos + i)))
            .collect();
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
        let positions: Vec<usize> = tokens.iter().map(|&(_, pos)| pos).collect();
        let layout = rope::table_layout(self.ropes(), n);
        let width = layout.iter().map(|(_, w)| n * w).sum();
        ws.cos_sin.resize(ws.cos_sin.len().max(width), 0.0);
        rope::fill_tables(self.ropes(), &layout, &positions, &mut ws.cos_sin[..width]);
        let step = StepTokens {
            batch,
            tokens: &tokens,
        };
        let rope = self
            .rope_of(&mtp.spec.layer)
            .ok_or_else(|| BackendError("the MTP layer's RoPE is none of the model's".into()))?;
        if !logits {
            let LayerMixer::Attention(a) = &mtp.layer.mixer else {
                return Err(BackendError("the MTP layer has no attention".into()));
            };
            let mut normed = vec![0.0f32; n * hidden];
            for (dst, src) in normed.chunks_exact_mut(hidden).zip(x.chunks_exact(hidden)) {
                rms_norm(isa, src, &mtp.layer.attn_norm, eps, dst);
            }
            let (at, width) = layout[rope];
            let tables = RopeTables {
                rope: &self.ropes()[rope],
                tables: &ws.cos_sin[at..at + n * width],
                width,
            };
            let l = mtp.spec.index();
            write_kv(
                isa,
                a,
                l,
                kv,
                &step,
                &tables,
                &normed,
                n,
                eps,
                &mut ws.attention,
            );
            return Ok((Vec::new(), Vec::new()));
        }
        let layer = (mtp.spec.index(), &mtp.layer, rope);
        self.run_layer(isa, layer, &mut x, kv, None, &step, &layout, ws)?;
        let mut out = vec![0.0f32; n * hidden];
        for (dst, src) in out.chunks_exact_mut(hidden).zip(x.chunks_exact(hidden)) {
            rms_norm(isa, src, &mtp.head_norm, eps, dst);
        }
        let mut logits = vec![0.0f32; n * self.logits_vocab()];
        matmul(isa, &out, n, self.lm_head(), &mut logits);
        Ok((out, logits))
    }

    /// After a target step whose final hidden states are `ws.hidden`: the MTP's K/V for every
    /// pair the step made known, and each slot's hidden states kept for the next step.
    pub fn mtp_catch_up(
        &self,
        isa: Isa,
        mtp: &MtpWeights,
        kv: &mut KvCache,
        state: &mut MtpState,
        batch: &[SeqBatch<'_>],
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let hidden = self.config().hidden_size;
        let step_rows = std::mem::take(&mut ws.hidden);
        let mut pairs: Vec<SeqBatch<'_>> = Vec::new();
        let mut rows: Vec<f32> = Vec::new();
        let mut first_row = 0;
        for seq in batch {
            let (s, len) = (seq.start_pos, seq.tokens.len());
            let own = &step_rows[first_row * hidden..(first_row + len) * hidden];
            first_row += len;
            let Some(slot) = seq.state_slot.map(|s| s as usize) else {
                continue;
            };
            // The pair at s - 1 needs the hidden state the last step left (none after a
            // restored snapshot: that pair's K/V stays as the prefix cache has it).
            let carried = (s > 0 && seq.state_copy.restore_from.is_none())
                .then(|| state.target_at(slot, s - 1, hidden))
                .flatten();
            // Pairs (x[p + 1], h[p]): with the carried row at s - 1 ..= e - 2, the step's
            // tokens; without it at s ..= e - 2, all but the first. The step's own rows are
            // h[s] ..= h[e - 2] either way.
            let (tokens, start) = match carried {
                Some(_) => (seq.tokens, s - 1),
                None => (&seq.tokens[1..], s),
            };
            if !tokens.is_empty() {
                pairs.push(SeqBatch {
                    tokens,
                    start_pos: start,
                    block_table: seq.block_table,
                    window_table: &[],
                    state_slot: None,
                    state_copy: Default::default(),
                    logits: LogitsRequest::None,
                });
                rows.extend_from_slice(carried.unwrap_or_default());
                rows.extend_from_slice(&own[..(len - 1) * hidden]);
            }
            let keep = if len <= KEPT_ROWS { 0 } else { len - 1 };
            state.target[slot] = Some((s + keep, own[keep * hidden..].to_vec()));
        }
        ws.hidden = step_rows;
        self.mtp_pass(isa, mtp, kv, &pairs, &rows, false, ws)
            .map(|_| ())
    }

    /// Draft steps: each request's pair at its position, from the target's hidden state
    /// there or the MTP's own last output; one logits row each.
    pub fn mtp_draft(
        &self,
        isa: Isa,
        mtp: &MtpWeights,
        kv: &mut KvCache,
        state: &mut MtpState,
        steps: &[MtpDraftStep<'_>],
        ws: &mut Workspace,
    ) -> Result<Vec<f32>, BackendError> {
        let hidden = self.config().hidden_size;
        let mut rows = Vec::with_capacity(steps.len() * hidden);
        for step in steps {
            let slot = step.state_slot as usize;
            let row = if step.from_target {
                state.target_at(slot, step.position, hidden)
            } else {
                state
                    .own
                    .get(slot)
                    .filter(|r| r.len() == hidden)
                    .map(Vec::as_slice)
            };
            let row = row.ok_or_else(|| {
                BackendError(format!(
                    "no hidden state for the MTP draft at position {} of slot {slot}",
                    step.position
                ))
            })?;
            rows.extend_from_slice(row);
        }
        let tokens = MtpDraftStep::tokens(steps);
        let batch = MtpDraftStep::batch(steps, &tokens);
        let (out, logits) = self.mtp_pass(isa, mtp, kv, &batch, &rows, true, ws)?;
        for (step, row) in steps.iter().zip(out.chunks_exact(hidden)) {
            if let Some(own) = state.own.get_mut(step.state_slot as usize) {
                own.clear();
                own.extend_from_slice(row);
            }
        }
        Ok(logits)
    }
}
