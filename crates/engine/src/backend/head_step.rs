//! The input of [`Backend::head_draft`](super::Backend::head_draft): one draft step of a
//! draft head (an MTP layer, an EAGLE-3 head), and the batch both backends run the steps as.

use super::{LogitsRequest, SeqBatch};

/// One draft step of a draft head ([`Backend::head_draft`]): the pair (`token`, the hidden
/// state at `position`) written at `position` of the head's K/V, scored for the token at
/// `position + 2`.
#[derive(Debug, Clone, Copy)]
pub struct HeadDraftStep<'a> {
    /// The sequence's state slot (where its hidden states are kept).
    pub state_slot: u32,
    /// The sequence's token at `position + 1`.
    pub token: u32,
    pub position: usize,
    /// KV pages of the sequence, covering `position`.
    pub block_table: &'a [u32],
    /// The hidden state is the model's own (after its last step; the first draft step), else
    /// the head's output of this sequence's previous draft step.
    pub from_target: bool,
}

impl<'a> HeadDraftStep<'a> {
    /// The steps' tokens, each a one-token sequence for [`HeadDraftStep::batch`].
    pub fn tokens(steps: &[HeadDraftStep<'_>]) -> Vec<[u32; 1]> {
        steps.iter().map(|s| [s.token]).collect()
    }

    /// The steps as the batch a backend's head pass runs: each step's token (`tokens`, from
    /// [`HeadDraftStep::tokens`]) at its position, over its pages, its logits row asked for.
    pub fn batch(steps: &[HeadDraftStep<'a>], tokens: &'a [[u32; 1]]) -> Vec<SeqBatch<'a>> {
        steps
            .iter()
            .zip(tokens)
            .map(|(s, t)| SeqBatch {
                tokens: t,
                start_pos: s.position,
                block_table: s.block_table,
                window_table: &[],
                state_slot: None,
                state_copy: Default::default(),
                logits: LogitsRequest::Last,
            })
            .collect()
    }
}
