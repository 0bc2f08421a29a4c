//! The fake model's recurrent state, for tests of models with linear-attention layers: each
//! slot remembers exactly the tokens its state has taken in, so a forward step can check that
//! the state it continues from is the state of the sequence's history — a snapshot restored
//! to the wrong place, a slot shared by two sequences or a rejected draft left in the state
//! all fail the step instead of passing unnoticed.

use crate::backend::{BackendError, SeqBatch};

/// One slot: the tokens taken in, in order, and where the last step began when that step
/// may be rewound ([`crate::backend::StateCopy::rewindable`]).
#[derive(Debug, Clone, Default)]
struct Slot {
    tokens: Vec<u32>,
    rewind_from: Option<usize>,
}

#[derive(Debug, Default)]
pub struct FakeStates {
    slots: Vec<Slot>,
}

impl FakeStates {
    pub fn new(slots: usize) -> Self {
        Self {
            slots: vec![Slot::default(); slots],
        }
    }

    pub fn num_slots(&self) -> usize {
        self.slots.len()
    }

    fn slot(&mut self, id: u32) -> Result<&mut Slot, BackendError> {
        let n = self.slots.len();
        self.slots
            .get_mut(id as usize)
            .ok_or_else(|| BackendError(format!("state slot {id} outside the {n} slots")))
    }

    /// Before the step of `seq`, whose tokens before `start_pos` are `history`: the state it
    /// starts from (restored, reset, kept or rewound) must be exactly `history`.
    pub fn begin(&mut self, seq: &SeqBatch<'_>, history: &[u32]) -> Result<(), BackendError> {
        let Some(id) = seq.state_slot else {
            return Err(BackendError(
                "the fake model keeps state: no slot given".into(),
            ));
        };
        if let Some(from) = seq.state_copy.restore_from {
            let restored = self.slot(from)?.tokens.clone();
            self.slot(id)?.tokens = restored;
        } else if seq.start_pos == 0 {
            self.slot(id)?.tokens.clear();
        }
        let slot = self.slot(id)?;
        let at = slot.tokens.len();
        if at > seq.start_pos {
            // Rewinding may drop only tokens of the last step past its first.
            match slot.rewind_from {
                Some(from) if seq.start_pos > from => slot.tokens.truncate(seq.start_pos),
                _ => {
                    return Err(BackendError(format!(
                        "state slot {id} has taken in {at} tokens; the step starts at {} and \
                         the last step may not be rewound there",
                        seq.start_pos
                    )))
                }
            }
        }
        if slot.tokens != history {
            return Err(BackendError(format!(
                "state slot {id} holds {:?}, the sequence's history is {history:?}",
                slot.tokens
            )));
        }
        slot.rewind_from = None;
        Ok(())
    }

    /// After the step: the slot takes in the step's tokens, and a snapshot is saved.
    pub fn end(&mut self, seq: &SeqBatch<'_>) -> Result<(), BackendError> {
        let Some(id) = seq.state_slot else {
            return Ok(());
        };
        let slot = self.slot(id)?;
        slot.tokens.extend_from_slice(seq.tokens);
        slot.rewind_from = seq.state_copy.rewindable.then_some(seq.start_pos);
        if let Some(to) = seq.state_copy.save_to {
            let saved = self.slot(id)?.tokens.clone();
            *self.slot(to)? = Slot {
                tokens: saved,
                rewind_from: None,
            };
        }
        Ok(())
    }
}
