//! A draft head on the GPU: the checkpoint's multi-token-prediction layer (`--speculative
//! mtp`) or an EAGLE-3 head given with the model (`--speculative eagle3`). What both share:
//! the hidden rows each sequence's next pass continues from, kept on the device per state
//! slot, and the two callers of a head's pass (crate::forward::mtp, crate::forward::eagle3) —
//! the catch-up after every target step, which writes the head's K/V for every pair the step
//! made known, and the draft steps the proposer asks for. The CPU's crate::draft_head of
//! ferrite-cpu is the same bookkeeping.
//!
//! A target row is what the head reads of the target at a position: its final residual (MTP)
//! or `fc` over three of its layers' inputs, captured during its step (EAGLE-3). Each slot
//! keeps the target rows of its last `KEPT` positions (a ring indexed by position: a
//! verification step has at most `MAX_SPEC_TOKENS + 1` rows, and the next step starts inside
//! it) and the head's own output of its last draft step.

use ferrite_engine::{
    BackendError, ForwardOutput, HeadDraftStep, LogitsRequest, SampledOutput, SeqBatch,
    MAX_SPEC_TOKENS,
};

use super::CudaBackend;
use crate::buffer::{upload, DeviceBuffer};
use crate::forward::{Capture, HeadRows, StepShape};
use crate::launchers::decode_splits;
use crate::weights::Eagle3Weights;

/// Target rows kept per slot.
const KEPT: usize = MAX_SPEC_TOKENS + 1;
/// Rows per slot in the ring: the kept target rows, then the head's own last output.
const SLOT_ROWS: usize = KEPT + 1;

/// The device buffers and host bookkeeping of a draft head.
pub(super) struct HeadState {
    /// f32 [slots x SLOT_ROWS, hidden].
    ring: DeviceBuffer,
    /// bf16 [tokens, 2 hidden]: a pass's input rows.
    input: DeviceBuffer,
    /// i32: a pass's index arrays (src, first_norm, copy_src, copy_dst).
    index: DeviceBuffer,
    index_cap: usize,
    /// An EAGLE-3 head's.
    eagle3: Option<Eagle3Buffers>,
    /// Per slot: the positions `first..end` whose target rows the ring holds.
    kept: Vec<Option<(usize, usize)>>,
    /// Per slot: the head's output of its last draft step is in the ring.
    own: Vec<bool>,
}

/// What an EAGLE-3 head adds to the buffers.
struct Eagle3Buffers {
    /// bf16 [tokens, 3 hidden]: the target's layer inputs, kept during its step.
    captured: DeviceBuffer,
    /// f32 [tokens, hidden]: the step's target rows `g = fc · captured`.
    g: DeviceBuffer,
    /// f32 [logit rows, draft vocab]: a draft step's logits before they are spread.
    draft_logits: DeviceBuffer,
}

fn ring_row(slot: usize, position: usize) -> i32 {
    (slot * SLOT_ROWS + position % KEPT) as i32
}

fn own_row(slot: usize) -> i32 {
    (slot * SLOT_ROWS + KEPT) as i32
}

/// A pass's index arrays, built on the host.
#[derive(Default)]
struct PassIndex {
    src: Vec<i32>,
    first_norm: Vec<i32>,
    copy_src: Vec<i32>,
    copy_dst: Vec<i32>,
}

impl CudaBackend {
    /// Drafts with `head`, an EAGLE-3 head trained for this model (`--speculative eagle3`),
    /// in place of the checkpoint's own MTP layer if it has one. Its attention must have the
    /// model's K/V geometry (its layer is one more KV-cache layer) and its MLP fit the
    /// workspace; its norms are the model's.
    pub fn with_eagle3(mut self, head: &ferrite_model::load::Eagle3Head) -> anyhow::Result<Self> {
        let (c, spec) = (&self.config, &head.spec);
        anyhow::ensure!(
            self.kv.is_none(),
            "with_eagle3 must come before init_kv_cache"
        );
        anyhow::ensure!(
            spec.hidden_size() == c.hidden_size,
            "EAGLE-3 heads narrower or wider than the model ({} vs {}) are not supported",
            spec.hidden_size(),
            c.hidden_size
        );
        anyhow::ensure!(
            spec.norm == self.weights.norm,
            "the EAGLE-3 head's norms ({:?}) differ from the model's ({:?}): not supported",
            spec.norm,
            self.weights.norm
        );
        let ferrite_model::plan::Mixer::Attention(a) = &spec.layer.mixer else {
            anyhow::bail!("the EAGLE-3 head's layer is not an attention layer");
        };
        let (heads, kv_heads, dim) = (a.num_heads, a.num_kv_heads, a.head_dim);
        anyhow::ensure!(
            (heads, kv_heads, dim) == (c.num_heads, c.num_kv_heads, c.head_dim),
            "the EAGLE-3 head's attention ({heads} heads, {kv_heads} K/V heads of {dim}) is \
             not the model's ({}, {}, {}): not supported on CUDA",
            c.num_heads,
            c.num_kv_heads,
            c.head_dim
        );
        if let ferrite_model::plan::MlpSpec::Gated { width, .. } = spec.layer.mlp {
            anyhow::ensure!(
                width <= c.intermediate_size,
                "the EAGLE-3 head's MLP ({width}) is wider than the model's ({}): not supported \
                 on CUDA",
                c.intermediate_size
            );
        }
        self.gpu.bind()?;
        let weights = Eagle3Weights::load(&self.gpu.stream, head)?;
        tracing::info!(
            aux_layers = ?spec.options.aux_layers,
            draft_vocab = spec.options.draft_vocab,
            own_head = head.own_head,
            own_embedding = head.own_embedding,
            "EAGLE-3 head loaded on the GPU"
        );
        self.eagle3 = Some(weights);
        Ok(self)
    }

    /// Buffers for `slots` state slots and steps of `tokens` tokens.
    pub(super) fn alloc_head(&mut self, slots: usize) -> anyhow::Result<()> {
        let (hidden, tokens) = (self.config.hidden_size, self.ws.cap.tokens);
        let stream = &self.gpu.stream;
        let index_cap = 4 * tokens;
        let eagle3 = match &self.eagle3 {
            Some(e) => Some(Eagle3Buffers {
                captured: DeviceBuffer::new(stream, tokens * 3 * hidden * 2)?,
                g: DeviceBuffer::new(stream, tokens * hidden * 4)?,
                draft_logits: DeviceBuffer::new(
                    stream,
                    self.ws.cap.logit_rows * e.draft_vocab().max(1) * 4,
                )?,
            }),
            None => None,
        };
        let extra: usize = eagle3.as_ref().map_or(0, |b| {
            b.captured.bytes() + b.g.bytes() + b.draft_logits.bytes()
        });
        self.head = Some(HeadState {
            ring: DeviceBuffer::new(stream, slots.max(1) * SLOT_ROWS * hidden * 4)?,
            input: DeviceBuffer::new(stream, tokens * 2 * hidden * 2)?,
            index: DeviceBuffer::new(stream, index_cap * 4)?,
            index_cap,
            eagle3,
            kept: vec![None; slots],
            own: vec![false; slots],
        });
        let bytes = slots * SLOT_ROWS * hidden * 4 + tokens * 4 * hidden + extra;
        tracing::info!(
            slots,
            mib = bytes as f64 / (1 << 20) as f64,
            "CUDA draft-head buffers allocated"
        );
        Ok(())
    }

    /// Forgets every kept row (after the warm-up's made-up sequences).
    pub(super) fn reset_head(&mut self) {
        if let Some(h) = &mut self.head {
            h.kept.iter_mut().for_each(|k| *k = None);
            h.own.iter_mut().for_each(|o| *o = false);
        }
    }

    /// What the target's step keeps for an EAGLE-3 head (`None`: nothing).
    pub(super) fn capture(&self) -> Option<Capture> {
        let (e, h) = (self.eagle3.as_ref()?, self.head.as_ref()?);
        Some(Capture {
            layers: e.spec.options.aux_layers,
            rows: h.eagle3.as_ref()?.captured.ptr(),
        })
    }

    /// The target's step leaves its final residual rows in `x` for the MTP layer (its last
    /// projection added there, not into the LM head's rows alone).
    pub(super) fn folds_residual(&self) -> bool {
        self.head_enabled && self.eagle3.is_none()
    }

    /// Uploads `index` and runs one pass of the head over `pairs` (with `step_rows`, the
    /// step's target rows), the whole layer and its logits when `draft`.
    fn head_pass(
        &mut self,
        pairs: &[SeqBatch<'_>],
        index: &PassIndex,
        draft: bool,
    ) -> anyhow::Result<()> {
        let (Some(h), Some(kv)) = (&self.head, &self.kv) else {
            anyhow::bail!("draft-head pass before enable_draft_head and init_kv_cache");
        };
        let n: usize = pairs.iter().map(|p| p.tokens.len()).sum();
        let stream = &self.gpu.stream;
        let at = |i: usize| h.index.ptr().offset(4 * i);
        let put = |dst, v: &[i32]| match v.is_empty() {
            true => Ok(()),
            false => upload(stream, dst, v),
        };
        let (copy_at, copies) = (2 * n, index.copy_src.len());
        anyhow::ensure!(
            copy_at + 2 * copies <= h.index_cap,
            "draft-head index overflow"
        );
        put(at(0), &index.src)?;
        put(at(n), &index.first_norm)?;
        put(at(copy_at), &index.copy_src)?;
        put(at(copy_at + copies), &index.copy_dst)?;
        let rows = HeadRows {
            ring: h.ring.ptr(),
            step_rows: h.eagle3.as_ref().map_or(self.ws.x, |b| b.g.ptr()),
            src: at(0),
            first_norm: at(n),
            copy_src: at(copy_at),
            copy_dst: at(copy_at + copies),
            copies,
            input: h.input.ptr(),
        };
        let draft_logits = h.eagle3.as_ref().map(|b| b.draft_logits.ptr());
        if n == 0 {
            // Nothing to pair: only the rows to keep.
            let model = self.model().map_err(|e| anyhow::anyhow!(e.0))?;
            return model.copy_to_ring(&rows, rows.step_rows);
        }
        self.inputs.build(pairs, &[], kv.page_size, None, false);
        let Some((meta, meta_cap)) = &self.meta else {
            anyhow::bail!("draft-head pass before init_kv_cache");
        };
        anyhow::ensure!(
            self.inputs.packed.len() <= *meta_cap,
            "draft-head step metadata overflow"
        );
        upload(stream, meta.ptr(), &self.inputs.packed)?;
        let splits = decode_splits(
            self.inputs.num_decodes,
            self.config.num_kv_heads,
            self.decode_slots,
            Some(self.inputs.max_decode_ctx),
            self.options.batch_invariant,
        );
        let shape = StepShape::of(&self.inputs, splits);
        let mut model = self.model().map_err(|e| anyhow::anyhow!(e.0))?;
        // The target's expert counters have no row for this layer; its captures none either.
        model.expert_load = None;
        model.capture = None;
        match (&self.eagle3, &self.weights.mtp, draft_logits) {
            (Some(e), _, Some(logits)) => model.enqueue_eagle3(&shape, e, &rows, logits, draft),
            (None, Some(mtp), _) => model.enqueue_mtp(&shape, mtp, &rows, draft),
            _ => anyhow::bail!("no draft head"),
        }
    }

    /// After a target step over `batch` (its final residual rows in the workspace, token
    /// order, or its captured layer inputs): the head's K/V for every pair the step made
    /// known, and each slot's last target rows kept for the next step.
    pub(super) fn head_catch_up(&mut self, batch: &[SeqBatch<'_>]) -> anyhow::Result<()> {
        let Some(h) = &mut self.head else {
            return Ok(());
        };
        let mut index = PassIndex::default();
        let mut pairs: Vec<SeqBatch<'_>> = Vec::new();
        let mut row = 0;
        for seq in batch {
            let (s, len) = (seq.start_pos, seq.tokens.len());
            let first_row = row;
            row += len;
            let Some(slot) = seq.state_slot.map(|s| s as usize) else {
                continue;
            };
            anyhow::ensure!(
                slot < h.kept.len(),
                "state slot {slot} past the draft-head ring"
            );
            // The pair at s - 1 needs the row the slot's last step left (none after a
            // restored snapshot or in a slot just taken: that pair's K/V stays as the prefix
            // cache has it).
            let copy = seq.state_copy;
            let carried = s > 0
                && copy.restore_from.is_none()
                && !copy.first_in_slot
                && h.kept[slot].is_some_and(|(a, e)| (a..e).contains(&(s - 1)));
            let (tokens, start) = match carried {
                true => (seq.tokens, s - 1),
                false => (&seq.tokens[1..], s),
            };
            if !tokens.is_empty() {
                if carried {
                    index.src.push(-1 - ring_row(slot, s - 1));
                }
                index
                    .src
                    .extend((first_row..first_row + len - 1).map(|r| r as i32));
                pairs.push(SeqBatch {
                    tokens,
                    start_pos: start,
                    block_table: seq.block_table,
                    window_table: &[],
                    state_slot: None,
                    state_copy: Default::default(),
                    logits: LogitsRequest::None,
                });
            }
            let keep = len.min(KEPT);
            for p in s + len - keep..s + len {
                index.copy_src.push((first_row + p - s) as i32);
                index.copy_dst.push(ring_row(slot, p));
            }
            h.kept[slot] = Some((s + len - keep, s + len));
            h.own[slot] = false;
        }
        index.first_norm = vec![0; index.src.len()];
        if index.copy_src.is_empty() {
            return Ok(());
        }
        let captured = h.eagle3.as_ref().map(|b| (b.captured.ptr(), b.g.ptr()));
        if let (Some(e), Some((inputs, g))) = (&self.eagle3, captured) {
            // The step's target rows g, which the pairs and the kept rows read.
            let model = self.model().map_err(|e| anyhow::anyhow!(e.0))?;
            model.eagle3_target_rows(row, e, inputs, g)?;
        }
        self.head_pass(&pairs, &index, false)
    }

    /// Draft steps of the head, one logits row each.
    pub(super) fn head_draft_steps(
        &mut self,
        steps: &[HeadDraftStep<'_>],
    ) -> Result<ForwardOutput, BackendError> {
        let err = |e: anyhow::Error| BackendError(format!("cuda: {e:#}"));
        self.gpu.bind().map_err(err)?;
        let Some(h) = &mut self.head else {
            return Err(BackendError("head_draft before enable_draft_head".into()));
        };
        let mut index = PassIndex::default();
        for (i, step) in steps.iter().enumerate() {
            let slot = step.state_slot as usize;
            let src = match step.from_target {
                true => h
                    .kept
                    .get(slot)
                    .copied()
                    .flatten()
                    .filter(|(a, e)| (*a..*e).contains(&step.position))
                    .map(|_| -1 - ring_row(slot, step.position)),
                false => h
                    .own
                    .get(slot)
                    .is_some_and(|&o| o)
                    .then(|| -1 - own_row(slot)),
            };
            let src = src.ok_or_else(|| {
                BackendError(format!(
                    "no hidden state for the draft at position {} of slot {slot}",
                    step.position
                ))
            })?;
            index.src.push(src);
            index.first_norm.push(i32::from(!step.from_target));
            index.copy_src.push(i as i32);
            index.copy_dst.push(own_row(slot));
        }
        for step in steps {
            h.own[step.state_slot as usize] = true;
        }
        let tokens = HeadDraftStep::tokens(steps);
        let batch = HeadDraftStep::batch(steps, &tokens);
        let mut out = SampledOutput {
            forward: ForwardOutput {
                logits: Vec::with_capacity(steps.len() * self.config.vocab_size),
                vocab_size: self.config.vocab_size,
            },
            tokens: vec![None; steps.len()],
        };
        if steps.is_empty() {
            return Ok(out.forward);
        }
        if steps.len() > self.ws.cap.logit_rows {
            return Err(BackendError(format!(
                "{} draft rows exceed the logits buffer",
                steps.len()
            )));
        }
        self.head_pass(&batch, &index, true).map_err(err)?;
        self.collect(0, steps.len(), &mut out).map_err(err)?;
        Ok(out.forward)
    }
}
