//! Rewinding a hybrid's recurrent state after rejected speculative drafts, on the GPU.
//!
//! A step whose tokens end in drafts (`StateCopy::rewindable`) first copies its sequence's
//! state slot aside (the state before the step) and, at every linear-attention layer, the
//! step's input projections of that sequence. When the sequence's next step starts inside the
//! last one (its later drafts were rejected), the slot gets the copy back and each layer runs
//! the kept tokens' recorded projections through the convolution and the delta rule again
//! (`Model::enqueue_replays`), outputs dropped: the state of a sequence that never saw the
//! rejected drafts. The engine counts this memory per seat
//! (`Backend::state_rewind_bytes_per_sequence`); seats are the first state slots.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_engine::SeqBatch;

use crate::buffer::{copy_on_device, upload, DeviceBuffer};
use crate::device_ptr::DevicePtr;
use crate::forward::{InputRecorder, Model};
use crate::launchers::GdnSequences;
use crate::weights::Mixer;

pub struct StateRewind {
    seats: usize,
    /// Most tokens a rewindable step has (the scored token and the drafts).
    step_tokens: usize,
    /// Where each slot's state is, and which steps may be rewound.
    ledger: RewindLedger,
    /// f32 values of one state slot.
    slot_len: usize,
    /// f32 values of one token's input projections (a row of the layer's `mixed`).
    ld: usize,
    /// The state offset of each linear-attention layer, in layer order: its block of `inputs`.
    layers: Vec<usize>,
    /// f32 [seats, slot_len]: each seat's state before its last rewindable step.
    before: DeviceBuffer,
    /// f32 [layers, seats, step_tokens, ld]: that step's input projections, per layer.
    inputs: DeviceBuffer,
    /// i32 [4, seats]: the replays' first rows, lengths, slots and fresh flags (all 0).
    meta: DeviceBuffer,
}

/// The host's account of the slots (no device memory): what each step replays and records.
#[derive(Debug)]
pub struct RewindLedger {
    seats: usize,
    step_tokens: usize,
    /// Tokens each slot's state has taken in (every slot, snapshots included).
    positions: Vec<usize>,
    /// Per seat: where its last step began, when that step may be rewound.
    rewindable_from: Vec<Option<usize>>,
}

/// What one step does besides its forward pass.
#[derive(Debug, Default)]
pub struct RewindPlan {
    /// Before it: (seat, tokens of its last step to take back in).
    pub replays: Vec<(usize, usize)>,
    /// During it: (seat, first token row in the step, tokens) of each rewindable sequence.
    pub records: Vec<(usize, usize, usize)>,
}

/// A step's recording: (seat, first token row, tokens) of each rewindable sequence.
pub struct StepRecording<'a> {
    pub rewind: &'a StateRewind,
    pub records: &'a [(usize, usize, usize)],
    pub stream: &'a CudaStream,
}

impl InputRecorder for StepRecording<'_> {
    fn record(&self, state_offset: usize, mixed: DevicePtr) -> anyhow::Result<()> {
        self.rewind
            .record(self.stream, state_offset, mixed, self.records)
    }
}

/// Where the replays' sequences are described for the linear-attention kernels.
#[derive(Debug, Clone, Copy)]
pub struct ReplaySequences {
    pub row: DevicePtr,
    pub len: DevicePtr,
    pub slot: DevicePtr,
    pub fresh: DevicePtr,
    pub count: usize,
    /// Rows spanned (the kernels' row space is the recorded inputs' `seats * step_tokens`).
    pub rows: usize,
    pub max_len: usize,
}

impl StateRewind {
    /// Bytes one seat takes.
    pub fn bytes_per_seat(slot_len: usize, ld: usize, layers: usize, step_tokens: usize) -> usize {
        4 * (slot_len + layers * step_tokens * ld)
    }

    pub fn new(
        stream: &Arc<CudaStream>,
        seats: usize,
        step_tokens: usize,
        slot_len: usize,
        ld: usize,
        layers: Vec<usize>,
        slots: usize,
    ) -> anyhow::Result<StateRewind> {
        let floats = layers.len() * seats * step_tokens * ld;
        Ok(StateRewind {
            before: DeviceBuffer::new(stream, 4 * (seats * slot_len).max(1))?,
            inputs: DeviceBuffer::new(stream, 4 * floats.max(1))?,
            meta: DeviceBuffer::new(stream, 4 * 4 * seats.max(1))?,
            seats,
            step_tokens,
            ledger: RewindLedger::new(seats, step_tokens, slots),
            slot_len,
            ld,
            layers,
        })
    }

    /// Rows the replays may span: the kernels' scratch must hold this many.
    pub fn rows(&self) -> usize {
        self.seats * self.step_tokens
    }

    pub fn ld(&self) -> usize {
        self.ld
    }

    /// What the step replays and records ([`RewindLedger::plan`]).
    pub fn plan(&mut self, batch: &[SeqBatch<'_>]) -> anyhow::Result<RewindPlan> {
        self.ledger.plan(batch)
    }

    /// Before the replays: each replaying seat's slot gets its state from before the last
    /// step back, and the replays' sequence table goes up. `state`: the slots' buffer.
    pub fn restore(
        &self,
        stream: &CudaStream,
        state: DevicePtr,
        replays: &[(usize, usize)],
    ) -> anyhow::Result<ReplaySequences> {
        let bytes = 4 * self.slot_len;
        let n = replays.len();
        let mut table = vec![0i32; 4 * self.seats.max(1)];
        for (i, &(seat, kept)) in replays.iter().enumerate() {
            copy_on_device(
                stream,
                state.offset(seat * bytes),
                self.before.at(seat * bytes),
                bytes,
            )?;
            table[i] = (seat * self.step_tokens) as i32;
            table[self.seats + i] = kept as i32;
            table[2 * self.seats + i] = seat as i32;
        }
        upload(stream, self.meta.ptr(), &table)?;
        let at = |k: usize| self.meta.at(4 * k * self.seats);
        Ok(ReplaySequences {
            row: at(0),
            len: at(1),
            slot: at(2),
            fresh: at(3),
            count: n,
            rows: replays
                .iter()
                .map(|&(seat, _)| (seat + 1) * self.step_tokens)
                .max()
                .unwrap_or(0),
            max_len: replays.iter().map(|&(_, kept)| kept).max().unwrap_or(0),
        })
    }

    /// Before the step (after the replays): each recording seat's state is copied aside.
    pub fn save_before(
        &self,
        stream: &CudaStream,
        state: DevicePtr,
        records: &[(usize, usize, usize)],
    ) -> anyhow::Result<()> {
        let bytes = 4 * self.slot_len;
        for &(seat, _, _) in records {
            copy_on_device(
                stream,
                self.before.at(seat * bytes),
                state.offset(seat * bytes),
                bytes,
            )?;
        }
        Ok(())
    }

    /// The recorded input projections of the layer whose state starts at `state_offset`:
    /// rows `ld` floats apart, seat `s`'s from row `s * step_tokens`.
    pub fn layer_inputs(&self, state_offset: usize) -> anyhow::Result<DevicePtr> {
        let layer = self
            .layers
            .iter()
            .position(|&o| o == state_offset)
            .ok_or_else(|| anyhow::anyhow!("no linear layer at state offset {state_offset}"))?;
        Ok(self.inputs.at(4 * layer * self.rows() * self.ld))
    }

    /// During the step, at the layer of `state_offset`: the recording sequences' rows of its
    /// input projections (`mixed`, rows `ld` floats apart) into the layer's record.
    pub fn record(
        &self,
        stream: &CudaStream,
        state_offset: usize,
        mixed: DevicePtr,
        records: &[(usize, usize, usize)],
    ) -> anyhow::Result<()> {
        let base = self.layer_inputs(state_offset)?;
        let row_bytes = 4 * self.ld;
        for &(seat, row, len) in records {
            copy_on_device(
                stream,
                base.offset(seat * self.step_tokens * row_bytes),
                mixed.offset(row * row_bytes),
                len * row_bytes,
            )?;
        }
        Ok(())
    }
}

impl RewindLedger {
    pub fn new(seats: usize, step_tokens: usize, slots: usize) -> RewindLedger {
        RewindLedger {
            seats,
            step_tokens,
            positions: vec![0; slots],
            rewindable_from: vec![None; seats],
        }
    }

    /// Holds each sequence's start against where its slot's state is, and says what the step
    /// replays and records (the batch is validated, snapshot restores named). Keeps the
    /// positions as if the step ran.
    pub fn plan(&mut self, batch: &[SeqBatch<'_>]) -> anyhow::Result<RewindPlan> {
        let mut plan = RewindPlan::default();
        let mut row = 0;
        for seq in batch {
            let (start, len) = (seq.start_pos, seq.tokens.len());
            let first_row = row;
            row += len;
            let Some(slot) = seq.state_slot.map(|s| s as usize) else {
                continue;
            };
            anyhow::ensure!(slot < self.positions.len(), "state slot {slot} unknown");
            if seq.state_copy.restore_from.is_some() {
                self.positions[slot] = start;
            }
            let at = self.positions[slot];
            if start != 0 && start != at {
                let from = self.rewindable_from.get(slot).copied().flatten();
                match from {
                    Some(from) if start > from && start < at => {
                        plan.replays.push((slot, start - from));
                    }
                    _ => anyhow::bail!(
                        "state slot {slot} holds the state after {at} tokens; a step cannot \
                         start at {start}"
                    ),
                }
            }
            self.positions[slot] = start + len;
            if let Some(from) = self.rewindable_from.get_mut(slot) {
                *from = None;
            }
            if seq.state_copy.rewindable {
                anyhow::ensure!(
                    slot < self.seats && len <= self.step_tokens,
                    "a rewindable step of {len} tokens in state slot {slot} (rewinds kept for \
                     {} seats, {} tokens)",
                    self.seats,
                    self.step_tokens
                );
                self.rewindable_from[slot] = Some(start);
                plan.records.push((slot, first_row, len));
            }
            if let Some(to) = seq.state_copy.save_to {
                self.positions[to as usize] = start + len;
            }
        }
        Ok(plan)
    }
}

impl Model<'_> {
    /// Each linear-attention layer takes the replays' kept tokens back into their slots
    /// (restored by [`StateRewind::restore`]), from the recorded input projections.
    pub fn enqueue_replays(
        &self,
        rewind: &StateRewind,
        replays: &ReplaySequences,
    ) -> anyhow::Result<()> {
        let state = self
            .state
            .ok_or_else(|| anyhow::anyhow!("a replay before init_state_slots"))?;
        anyhow::ensure!(
            replays.rows <= self.ws.cap.tokens,
            "replays span {} rows, the workspace holds {}",
            replays.rows,
            self.ws.cap.tokens
        );
        let seqs = GdnSequences {
            row: replays.row,
            len: replays.len,
            slot: replays.slot,
            fresh: replays.fresh,
            count: replays.count,
            tokens: replays.rows,
            max_len: replays.max_len,
            state,
            slot_stride: self.weights.state_len,
        };
        for layer in &self.weights.layers {
            if let Mixer::LinearAttention(g) = &layer.mixer {
                let mixed = rewind.layer_inputs(g.state_offset)?;
                self.enqueue_gdn(&seqs, g, mixed, rewind.ld())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ferrite_engine::{LogitsRequest, StateCopy};

    use super::*;

    fn step<'a>(tokens: &'a [u32], start_pos: usize, slot: u32, rewindable: bool) -> SeqBatch<'a> {
        SeqBatch {
            tokens,
            start_pos,
            block_table: &[],
            window_table: &[],
            state_slot: Some(slot),
            state_copy: StateCopy {
                rewindable,
                ..StateCopy::default()
            },
            logits: LogitsRequest::All,
        }
    }

    #[test]
    fn a_step_inside_the_last_rewindable_one_replays_what_was_kept() {
        // Two seats, steps of at most 5 tokens, one snapshot slot.
        let mut ledger = RewindLedger::new(2, 5, 3);
        let prompt = [1u32; 8];
        let plan = ledger.plan(&[step(&prompt, 0, 0, false), step(&prompt[..3], 0, 1, false)]);
        assert!(plan.unwrap().replays.is_empty());
        // Seat 0 verifies 4 drafts (positions 8..13), seat 1 decodes plainly after it.
        let plan = ledger
            .plan(&[step(&[2; 5], 8, 0, true), step(&[3], 3, 1, false)])
            .unwrap();
        assert_eq!(plan.records, vec![(0, 0, 5)]);
        assert!(plan.replays.is_empty());
        // Two drafts kept: the next step starts at 8 + 1 + 2 = 11, so 3 tokens are replayed.
        let plan = ledger.plan(&[step(&[4; 3], 11, 0, true)]).unwrap();
        assert_eq!(plan.replays, vec![(0, 3)]);
        assert_eq!(plan.records, vec![(0, 0, 3)]);
        // Everything kept: the next step starts where the state is; nothing replayed.
        let plan = ledger.plan(&[step(&[5], 14, 0, false)]).unwrap();
        assert!(plan.replays.is_empty() && plan.records.is_empty());
    }

    #[test]
    fn a_start_the_state_cannot_reach_is_an_error() {
        let mut ledger = RewindLedger::new(1, 5, 1);
        ledger.plan(&[step(&[1; 6], 0, 0, false)]).unwrap();
        // Behind a step that was not rewindable.
        let e = ledger.plan(&[step(&[1], 4, 0, false)]).unwrap_err();
        assert!(
            e.to_string().contains("holds the state after 6 tokens"),
            "{e}"
        );
        // At the start of the rewindable step itself (its first token is always kept).
        let mut ledger = RewindLedger::new(1, 5, 1);
        ledger.plan(&[step(&[1; 6], 0, 0, false)]).unwrap();
        ledger.plan(&[step(&[1; 3], 6, 0, true)]).unwrap();
        assert!(ledger.plan(&[step(&[1], 6, 0, false)]).is_err());
        // A rewindable step longer than the rewinds were sized for, or outside the seats.
        let mut ledger = RewindLedger::new(1, 2, 2);
        assert!(ledger.plan(&[step(&[1; 3], 0, 0, true)]).is_err());
        assert!(ledger.plan(&[step(&[1; 2], 0, 1, true)]).is_err());
    }

    #[test]
    fn a_restored_snapshot_sets_where_the_state_is() {
        let mut ledger = RewindLedger::new(1, 5, 2);
        let mut restore = step(&[1; 2], 16, 0, false);
        restore.state_copy.restore_from = Some(1);
        assert!(ledger.plan(&[restore]).unwrap().replays.is_empty());
        assert!(ledger.plan(&[step(&[1], 18, 0, false)]).is_ok());
    }
}
