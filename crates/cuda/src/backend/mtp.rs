//! Drafting with the model's own multi-token-prediction layer on the GPU (`--speculative
//! mtp`): the hidden rows each sequence's next MTP pass continues from, kept on the device per
//! state slot, and the two passes (crate::forward::mtp) — the catch-up after every target
//! step, which writes the layer's K/V for every pair the step made known, and the draft steps
//! the proposer asks for. The CPU's crate::mtp of ferrite-cpu is the same bookkeeping.
//!
//! Each slot keeps the target's final residual rows of its last `KEPT` positions (a ring
//! indexed by position: a verification step has at most `MAX_SPEC_TOKENS + 1` rows, and the
//! next step starts inside it) and the MTP layer's own output of its last draft step.

use ferrite_engine::{
    BackendError, ForwardOutput, HeadDraftStep, LogitsRequest, SampledOutput, SeqBatch,
    MAX_SPEC_TOKENS,
};

use super::CudaBackend;
use crate::buffer::{upload, DeviceBuffer};
use crate::forward::{MtpRows, StepShape};
use crate::launchers::decode_splits;

/// Target rows kept per slot.
const KEPT: usize = MAX_SPEC_TOKENS + 1;
/// Rows per slot in the ring: the kept target rows, then the MTP's own last output.
const SLOT_ROWS: usize = KEPT + 1;

/// The device buffers and host bookkeeping of MTP drafting.
pub(super) struct MtpState {
    /// f32 [slots x SLOT_ROWS, hidden].
    ring: DeviceBuffer,
    /// bf16 [tokens, 2 hidden]: a pass's input rows.
    input: DeviceBuffer,
    /// i32: a pass's index arrays (src, first_norm, copy_src, copy_dst).
    index: DeviceBuffer,
    index_cap: usize,
    /// Per slot: the positions `first..end` whose target rows the ring holds.
    kept: Vec<Option<(usize, usize)>>,
    /// Per slot: the MTP's output of its last draft step is in the ring.
    own: Vec<bool>,
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
    /// Buffers for `slots` state slots and steps of `tokens` tokens.
    pub(super) fn alloc_mtp(&mut self, slots: usize) -> anyhow::Result<()> {
        let (hidden, tokens) = (self.config.hidden_size, self.ws.cap.tokens);
        let stream = &self.gpu.stream;
        let index_cap = 4 * tokens;
        self.mtp = Some(MtpState {
            ring: DeviceBuffer::new(stream, slots.max(1) * SLOT_ROWS * hidden * 4)?,
            input: DeviceBuffer::new(stream, tokens * 2 * hidden * 2)?,
            index: DeviceBuffer::new(stream, index_cap * 4)?,
            index_cap,
            kept: vec![None; slots],
            own: vec![false; slots],
        });
        tracing::info!(
            slots,
            mib = (slots * SLOT_ROWS * hidden * 4 + tokens * 4 * hidden) as f64 / (1 << 20) as f64,
            "CUDA MTP buffers allocated"
        );
        Ok(())
    }

    /// Forgets every kept row (after the warm-up's made-up sequences).
    pub(super) fn reset_mtp(&mut self) {
        if let Some(m) = &mut self.mtp {
            m.kept.iter_mut().for_each(|k| *k = None);
            m.own.iter_mut().for_each(|o| *o = false);
        }
    }

    /// Uploads `index` and runs one MTP pass over `pairs` (the step's residual rows still in
    /// the workspace), the whole layer and its logits when `draft`.
    fn mtp_pass(
        &mut self,
        pairs: &[SeqBatch<'_>],
        index: &PassIndex,
        draft: bool,
    ) -> anyhow::Result<()> {
        let (Some(m), Some(kv), Some(mtp)) = (&self.mtp, &self.kv, &self.weights.mtp) else {
            anyhow::bail!("MTP pass before enable_draft_head and init_kv_cache");
        };
        let n: usize = pairs.iter().map(|p| p.tokens.len()).sum();
        let stream = &self.gpu.stream;
        let at = |i: usize| m.index.ptr().offset(4 * i);
        let put = |dst, v: &[i32]| match v.is_empty() {
            true => Ok(()),
            false => upload(stream, dst, v),
        };
        let (copy_at, copies) = (2 * n, index.copy_src.len());
        anyhow::ensure!(copy_at + 2 * copies <= m.index_cap, "MTP index overflow");
        put(at(0), &index.src)?;
        put(at(n), &index.first_norm)?;
        put(at(copy_at), &index.copy_src)?;
        put(at(copy_at + copies), &index.copy_dst)?;
        let rows = MtpRows {
            ring: m.ring.ptr(),
            src: at(0),
            first_norm: at(n),
            copy_src: at(copy_at),
            copy_dst: at(copy_at + copies),
            copies,
            input: m.input.ptr(),
        };
        if n == 0 {
            // Nothing to pair: only the rows to keep.
            let model = self.model().map_err(|e| anyhow::anyhow!(e.0))?;
            return model.copy_to_ring(&rows);
        }
        self.inputs.build(pairs, &[], kv.page_size, None, false);
        let Some((meta, meta_cap)) = &self.meta else {
            anyhow::bail!("MTP pass before init_kv_cache");
        };
        anyhow::ensure!(
            self.inputs.packed.len() <= *meta_cap,
            "MTP step metadata overflow"
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
        // The target's expert counters have no row for this layer.
        model.expert_load = None;
        model.enqueue_mtp(&shape, mtp, &rows, draft)
    }

    /// After a target step over `batch` (its final residual rows in the workspace, token
    /// order): the MTP's K/V for every pair the step made known, and each slot's last rows
    /// kept for the next step.
    pub(super) fn mtp_catch_up(&mut self, batch: &[SeqBatch<'_>]) -> anyhow::Result<()> {
        let Some(m) = &mut self.mtp else {
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
            anyhow::ensure!(slot < m.kept.len(), "state slot {slot} past the MTP ring");
            // The pair at s - 1 needs the row the slot's last step left (none after a
            // restored snapshot: that pair's K/V stays as the prefix cache has it).
            let carried = s > 0
                && seq.state_copy.restore_from.is_none()
                && m.kept[slot].is_some_and(|(a, e)| (a..e).contains(&(s - 1)));
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
            m.kept[slot] = Some((s + len - keep, s + len));
            m.own[slot] = false;
        }
        index.first_norm = vec![0; index.src.len()];
        self.mtp_pass(&pairs, &index, false)
    }

    /// Draft steps of the MTP layer, one logits row each.
    pub(super) fn mtp_draft_steps(
        &mut self,
        steps: &[HeadDraftStep<'_>],
    ) -> Result<ForwardOutput, BackendError> {
        let err = |e: anyhow::Error| BackendError(format!("cuda: {e:#}"));
        self.gpu.bind().map_err(err)?;
        let Some(m) = &mut self.mtp else {
            return Err(BackendError("mtp_draft before enable_draft_head".into()));
        };
        let mut index = PassIndex::default();
        for (i, step) in steps.iter().enumerate() {
            let slot = step.state_slot as usize;
            let src = match step.from_target {
                true => m
                    .kept
                    .get(slot)
                    .copied()
                    .flatten()
                    .filter(|(a, e)| (*a..*e).contains(&step.position))
                    .map(|_| -1 - ring_row(slot, step.position)),
                false => m
                    .own
                    .get(slot)
                    .is_some_and(|&o| o)
                    .then(|| -1 - own_row(slot)),
            };
            let src = src.ok_or_else(|| {
                BackendError(format!(
                    "no hidden state for the MTP draft at position {} of slot {slot}",
                    step.position
                ))
            })?;
            index.src.push(src);
            index.first_norm.push(i32::from(!step.from_target));
            index.copy_src.push(i as i32);
            index.copy_dst.push(own_row(slot));
        }
        for step in steps {
            m.own[step.state_slot as usize] = true;
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
                "{} MTP draft rows exceed the logits buffer",
                steps.len()
            )));
        }
        self.mtp_pass(&batch, &index, true).map_err(err)?;
        self.collect(0, steps.len(), &mut out).map_err(err)?;
        Ok(out.forward)
    }
}
