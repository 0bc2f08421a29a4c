//! The recurrent state of the linear-attention layers (qwen3_next, qwen3_5) on the CPU: a slot
//! per running sequence (the engine's `SeqBatch::state_slot`) and per prefix-cache snapshot,
//! and what it takes to rewind a step whose tokens end in speculative drafts.
//!
//! A state cannot forget a token, so rewinding keeps the state before the step and the step's
//! inputs to each layer (its projections, before the convolution); when the next step starts
//! inside the last one, each layer takes its state back and runs the kept tokens' inputs
//! through the convolution and the recurrence again. That is the same arithmetic on the same
//! numbers as running them in a step, so a rewound state is bit for bit the state of a
//! sequence that never saw the rejected drafts.

use ferrite_engine::{BackendError, SeqBatch};
use ferrite_model::plan::{Mixer, ModelPlan};

/// f32 values of one sequence's state over every linear-attention layer of `plan`.
pub fn state_len(plan: &ModelPlan) -> usize {
    plan.layers
        .iter()
        .map(|l| match &l.mixer {
            Mixer::LinearAttention(spec) => spec.state_len(),
            Mixer::Attention(_) => 0,
        })
        .sum()
}

/// f32 values one token's inputs take over every linear-attention layer of `plan`, as a
/// rewindable step records them ([`LayerInputs`]).
pub fn inputs_len(plan: &ModelPlan) -> usize {
    plan.layers
        .iter()
        .map(|l| match &l.mixer {
            Mixer::LinearAttention(spec) => spec.conv_channels() + 2 * spec.num_value_heads,
            Mixer::Attention(_) => 0,
        })
        .sum()
}

/// The state of every slot: per slot, per linear-attention layer, the convolution's last
/// `conv_kernel - 1` inputs (`[taps - 1, channels]`, oldest first) and each value head's
/// `key_head_dim x value_head_dim` matrix.
pub struct StateCache {
    /// f32 values of one slot.
    slot_len: usize,
    /// Offset of each layer's state inside a slot (`None` for attention layers).
    layer_offsets: Vec<Option<usize>>,
    data: Vec<f32>,
    /// Tokens each slot's state has taken in.
    positions: Vec<usize>,
    /// Per slot: what rewinding its last step takes, when that step was rewindable.
    rewinds: Vec<Option<Rewind>>,
    /// Per slot: what this step records for rewinding it.
    recording: Vec<Option<Rewind>>,
    /// This step's sequences, in batch order: what each layer does with their state.
    step: Vec<SlotStep>,
}

/// What rewinding one step of one sequence takes: where the step began, and per layer (by
/// layer index; empty for attention layers) the state before it and the step's inputs.
struct Rewind {
    start: usize,
    layers: Vec<LayerInputs>,
}

/// One layer's state before a step, and the step's inputs to it per token: the projections
/// before the convolution (`[len, channels]`), beta and decay inputs (`[len, heads]`).
#[derive(Default)]
pub struct LayerInputs {
    pub state: Vec<f32>,
    pub mixed: Vec<f32>,
    pub b: Vec<f32>,
    pub a: Vec<f32>,
}

/// What one sequence's step does with its slot.
#[derive(Debug, Clone, Copy)]
struct SlotStep {
    slot: usize,
    /// Before the step: take the last step's first this-many tokens back in from the state
    /// before it (the drafts after them were rejected).
    replay: Option<usize>,
    /// The step's tokens end in drafts: record what rewinding it takes.
    record: bool,
}

/// One sequence's share of a layer's state for this step.
pub struct LayerSlot<'a> {
    /// The layer's state in the sequence's slot.
    pub state: &'a mut [f32],
    /// Rewind first: the last step's inputs to this layer, and how many tokens of them to
    /// take back in.
    pub replay: Option<(usize, &'a LayerInputs)>,
    /// Record this step's inputs here.
    pub record: Option<&'a mut LayerInputs>,
}

impl StateCache {
    pub fn new(plan: &ModelPlan, slots: usize) -> Result<StateCache, BackendError> {
        let mut offset = 0;
        let layer_offsets = plan
            .layers
            .iter()
            .map(|l| match &l.mixer {
                Mixer::LinearAttention(spec) => {
                    let at = offset;
                    offset += spec.state_len();
                    Some(at)
                }
                Mixer::Attention(_) => None,
            })
            .collect();
        let total = offset.checked_mul(slots).ok_or_else(|| {
            BackendError(format!("{slots} state slots of {offset} values overflow"))
        })?;
        let mut data = Vec::new();
        data.try_reserve_exact(total)
            .map_err(|e| BackendError(format!("recurrent state of {total} f32: {e}")))?;
        data.resize(total, 0.0);
        Ok(StateCache {
            slot_len: offset,
            layer_offsets,
            data,
            positions: vec![0; slots],
            rewinds: (0..slots).map(|_| None).collect(),
            recording: (0..slots).map(|_| None).collect(),
            step: Vec::new(),
        })
    }

    pub fn num_slots(&self) -> usize {
        self.positions.len()
    }

    /// Copies slot `from`'s whole state (every layer) into slot `to` (a prefix-cache
    /// snapshot restored or saved).
    fn copy_slot(&mut self, from: usize, to: usize) -> Result<(), BackendError> {
        let len = self.slot_len;
        if from.max(to) >= self.num_slots() {
            return Err(BackendError(format!(
                "state copy {from} -> {to} outside the {} slots",
                self.num_slots()
            )));
        }
        self.data
            .copy_within(from * len..(from + 1) * len, to * len);
        self.positions[to] = self.positions[from];
        Ok(())
    }

    /// Before a step (after the batch is validated): each sequence restoring a snapshot gets
    /// it in its slot, and each sequence's start is held against where its state is: at it,
    /// at 0 (a new sequence), or inside a rewindable last step (rewound by each layer).
    pub fn begin_step(&mut self, batch: &[SeqBatch<'_>]) -> Result<(), BackendError> {
        self.step.clear();
        for seq in batch {
            let Some(slot) = seq.state_slot.map(|s| s as usize) else {
                continue;
            };
            if let Some(from) = seq.state_copy.restore_from {
                self.copy_slot(from as usize, slot)?;
                self.positions[slot] = seq.start_pos;
                self.rewinds[slot] = None;
            }
            let at = self.positions[slot];
            let replay = match (seq.start_pos, &self.rewinds[slot]) {
                (0, _) => None,
                (start, _) if start == at => None,
                (start, Some(r)) if start > r.start && start < at => Some(start - r.start),
                (start, _) => {
                    return Err(BackendError(format!(
                        "state slot {slot} holds the state after {at} tokens; a step cannot \
                         start at {start}"
                    )))
                }
            };
            self.step.push(SlotStep {
                slot,
                replay,
                record: seq.state_copy.rewindable,
            });
            self.recording[slot] = seq.state_copy.rewindable.then(|| Rewind {
                start: seq.start_pos,
                layers: self
                    .layer_offsets
                    .iter()
                    .map(|_| LayerInputs::default())
                    .collect(),
            });
        }
        Ok(())
    }

    /// The state of `layer` for the `i`-th sequence of the step with a slot, with what
    /// rewinding and recording take (`len`: the layer's state length).
    pub fn layer_slot(&mut self, layer: usize, i: usize, len: usize) -> LayerSlot<'_> {
        let step = self.step[i];
        let at = step.slot * self.slot_len + self.layer_offsets[layer].unwrap_or(0);
        let replay = step.replay.and_then(|kept| {
            let inputs = &self.rewinds[step.slot].as_ref()?.layers[layer];
            Some((kept, inputs))
        });
        let record = match &mut self.recording[step.slot] {
            Some(r) if step.record => Some(&mut r.layers[layer]),
            _ => None,
        };
        LayerSlot {
            state: &mut self.data[at..at + len],
            replay,
            record,
        }
    }

    /// After a step: each slot's state is after the step's tokens, rewindable if the step
    /// recorded; each sequence saving a snapshot copies its slot there.
    pub fn end_step(&mut self, batch: &[SeqBatch<'_>]) -> Result<(), BackendError> {
        for seq in batch {
            let Some(slot) = seq.state_slot.map(|s| s as usize) else {
                continue;
            };
            self.positions[slot] = seq.start_pos + seq.tokens.len();
            self.rewinds[slot] = self.recording[slot].take();
            if let Some(to) = seq.state_copy.save_to {
                self.copy_slot(slot, to as usize)?;
                self.rewinds[to as usize] = None;
            }
        }
        Ok(())
    }
}
