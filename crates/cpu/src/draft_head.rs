//! A draft head on the CPU: a layer that drafts from the target's own hidden states, the
//! checkpoint's MTP layer (`mtp.rs`) or an EAGLE-3 head (`eagle3.rs`), and what both share:
//! the hidden rows kept per state slot, and the two callers of a head's pass.
//!
//! After each target step, the catch-up: every pair (token `p + 1`, hidden row at `p`) the
//! step made known (a sequence's chunk `s..e` gives the pairs at `s - 1 ..= e - 2`, the first
//! one from the row the sequence's previous step left), so the head's K/V (a KV-cache layer
//! after the decoder's, addressed by the sequence's pages) follows the target's, drafts' pairs
//! included (a rejected draft's are overwritten when its position comes again). Then the
//! draft steps the proposer asks for (`Backend::head_draft`): the first from the target's row
//! at the sequence's last computed position, each next from the head's own output of the
//! step before. A target row is what the head reads of the target at a position: its final
//! hidden state (MTP), or `fc` over three of its layers' inputs (EAGLE-3).

use ferrite_engine::{BackendError, HeadDraftStep, LogitsRequest, SeqBatch};

use crate::eagle3::Eagle3Weights;
use crate::kernels::matmul::matmul;
use crate::kv_cache::{KvCache, KvShape};
use crate::model::{HiddenCapture, Model, Workspace};
use crate::mtp::MtpWeights;
use crate::simd::Isa;

/// Most rows of a step kept per slot: a verification step's (the scored token and its
/// drafts); a longer step keeps its last row, all the next step can start from.
const KEPT_ROWS: usize = 64;

#[derive(Debug)]
pub enum DraftHead {
    Mtp(Box<MtpWeights>),
    Eagle3(Box<Eagle3Weights>),
}

impl DraftHead {
    /// The K/V geometry of its attention.
    pub fn kv_shape(&self) -> KvShape {
        match self {
            DraftHead::Mtp(m) => m.kv_shape(),
            DraftHead::Eagle3(e) => e.kv_shape(),
        }
    }

    /// What the target's forward pass keeps for it.
    pub fn capture(&self) -> HiddenCapture {
        match self {
            DraftHead::Mtp(_) => HiddenCapture::Final,
            DraftHead::Eagle3(e) => HiddenCapture::LayerInputs(e.spec.options.aux_layers),
        }
    }

    /// The target rows of `n` tokens made from what the forward pass captured, where the head
    /// does not read the captured rows themselves (`None`: MTP reads them as they are).
    fn target_rows(&self, isa: Isa, captured: &[f32], n: usize, hidden: usize) -> Option<Vec<f32>> {
        match self {
            DraftHead::Mtp(_) => None,
            DraftHead::Eagle3(e) => {
                let mut rows = vec![0.0f32; n * hidden];
                matmul(isa, &captured[..n * e.fc_width()], n, e.fc(), &mut rows);
                Some(rows)
            }
        }
    }
}

/// Hidden rows kept per state slot between steps.
#[derive(Debug, Default)]
pub struct HeadState {
    /// The target rows of the slot's last step: the first position, rows.
    target: Vec<Option<(usize, Vec<f32>)>>,
    /// The head's own output of the slot's last draft step.
    own: Vec<Vec<f32>>,
}

impl HeadState {
    pub fn new(slots: usize) -> HeadState {
        HeadState {
            target: vec![None; slots],
            own: vec![Vec::new(); slots],
        }
    }

    /// The target row at `position` of `slot`, if its last step left it.
    fn target_at(&self, slot: usize, position: usize, hidden: usize) -> Option<&[f32]> {
        let (first, rows) = self.target.get(slot)?.as_ref()?;
        let i = position.checked_sub(*first)?;
        rows.get(i * hidden..(i + 1) * hidden)
    }
}

impl Model {
    /// One pass of the head over `batch` (each sequence's tokens are its pairs' tokens,
    /// `start_pos` the first pair's position) with one hidden row per token: writes the
    /// head's K/V; with `logits`, runs it whole and returns the rows the next draft step
    /// continues from and their logits over the vocabulary, else stops there.
    #[allow(clippy::too_many_arguments)]
    fn head_pass(
        &self,
        isa: Isa,
        head: &DraftHead,
        kv: &mut KvCache,
        batch: &[SeqBatch<'_>],
        hidden_rows: &[f32],
        logits: bool,
        ws: &mut Workspace,
    ) -> Result<(Vec<f32>, Vec<f32>), BackendError> {
        match head {
            DraftHead::Mtp(m) => self.mtp_pass(isa, m, kv, batch, hidden_rows, logits, ws),
            DraftHead::Eagle3(e) => self.eagle3_pass(isa, e, kv, batch, hidden_rows, logits, ws),
        }
    }

    /// After a target step whose captured rows are `ws.hidden`: the head's K/V for every pair
    /// the step made known, and each slot's target rows kept for the next step.
    pub fn head_catch_up(
        &self,
        isa: Isa,
        head: &DraftHead,
        kv: &mut KvCache,
        state: &mut HeadState,
        batch: &[SeqBatch<'_>],
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let hidden = self.config().hidden_size;
        let n: usize = batch.iter().map(|s| s.tokens.len()).sum();
        // The captured rows are taken out of the workspace for the pass (which borrows the
        // rest of it) and put back after.
        let captured = std::mem::take(&mut ws.hidden);
        let made = head.target_rows(isa, &captured, n, hidden);
        let step_rows = made.as_deref().unwrap_or(&captured[..n * hidden]);
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
            // The pair at s - 1 needs the row the sequence's last step left (none after a
            // restored snapshot or in a slot just taken: that pair's K/V stays as the prefix
            // cache has it).
            let copy = seq.state_copy;
            let carried = (s > 0 && copy.restore_from.is_none() && !copy.first_in_slot)
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
        let result = self.head_pass(isa, head, kv, &pairs, &rows, false, ws);
        ws.hidden = captured;
        result.map(|_| ())
    }

    /// Draft steps: each request's pair at its position, from the target's row there or the
    /// head's own last output; one logits row each.
    pub fn head_draft(
        &self,
        isa: Isa,
        head: &DraftHead,
        kv: &mut KvCache,
        state: &mut HeadState,
        steps: &[HeadDraftStep<'_>],
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
                    "no hidden state for the draft at position {} of slot {slot}",
                    step.position
                ))
            })?;
            rows.extend_from_slice(row);
        }
        let tokens = HeadDraftStep::tokens(steps);
        let batch = HeadDraftStep::batch(steps, &tokens);
        let (out, logits) = self.head_pass(isa, head, kv, &batch, &rows, true, ws)?;
        for (step, row) in steps.iter().zip(out.chunks_exact(hidden)) {
            if let Some(own) = state.own.get_mut(step.state_slot as usize) {
                own.clear();
                own.extend_from_slice(row);
            }
        }
        Ok(logits)
    }
}
