//! The boundary between the scheduler and whatever runs the forward pass.
//!
//! The scheduler decides *what* runs (which tokens of which sequences, into which KV pages);
//! a [`Backend`] decides *how* (CPU kernels, CUDA graphs). Nothing here knows about tensors.

use std::sync::Arc;

use thiserror::Error;

use crate::constraint::DeviceMask;
use crate::stats::ExpertLoad;

mod head_step;
pub use head_step::HeadDraftStep;

#[derive(Debug, Error)]
#[error("backend: {0}")]
pub struct BackendError(pub String);

/// Which logits a sequence wants back from a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsRequest {
    /// A prefill chunk that does not end the prompt: nothing to sample.
    None,
    /// Only the last token's logits (the usual case: sample the next token).
    Last,
    /// One row per token of `tokens` (prompt logprobs for `echo`, speculative verification).
    All,
}

/// One sequence's share of a forward step.
#[derive(Debug, Clone, Copy)]
pub struct SeqBatch<'a> {
    /// The new tokens run this step (a prefill chunk, or one decode token).
    pub tokens: &'a [u32],
    /// Position of `tokens[0]` in the sequence = number of tokens whose K/V are already in the cache.
    pub start_pos: usize,
    /// KV page ids of this sequence, in order; covers positions `0..start_pos + tokens.len()`.
    /// Position `p` lives in page `block_table[p / page_size]`, slot `p % page_size`.
    pub block_table: &'a [u32],
    /// The pages of the sliding-window layers, index-aligned with `block_table`, for a backend
    /// that keeps them in a pool of their own ([`Backend::init_window_kv_cache`]; empty
    /// otherwise, and ignored by a backend without one). Pages behind every query's window are
    /// `kv::NULL_WINDOW_PAGE` (0), never written.
    pub window_table: &'a [u32],
    /// The sequence's recurrent-state slot, for a model with linear-attention layers (`None`
    /// otherwise). The slot holds the state after positions `0..start_pos`; the backend starts
    /// it from zero when `start_pos` is 0. After a step that kept what rewinding takes
    /// ([`StateCopy::rewindable`]), the next step of the sequence may start inside that step's
    /// tokens (its later drafts were rejected): the backend rewinds the state to `start_pos`.
    pub state_slot: Option<u32>,
    /// State copied into `state_slot` before the step, or out of it after (prefix caching of
    /// a model with recurrent state).
    pub state_copy: StateCopy,
    pub logits: LogitsRequest,
}

/// Copies of a sequence's recurrent state around its step: both name snapshot slots (ids in
/// the same space as `state_slot`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCopy {
    /// Before the step: this snapshot (the state after positions `0..start_pos`) into the
    /// sequence's slot (a prefix-cache hit; `start_pos` is then not 0).
    pub restore_from: Option<u32>,
    /// After the step: the sequence's slot into this snapshot slot.
    pub save_to: Option<u32>,
    /// The step's tokens end in speculative drafts: keep what it takes to rewind the state to
    /// any of the step's positions, until the sequence's next step (which says by its
    /// `start_pos` how many tokens were kept). Never together with `save_to`.
    pub rewindable: bool,
    /// The sequence's first step since it took `state_slot`: whatever the slot keeps beside
    /// recurrent state (a draft head's hidden rows) is another sequence's, not carried over.
    pub first_in_slot: bool,
}

/// The shape of the KV pool a batch is checked against by [`validate_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub vocab_size: usize,
    pub num_pages: usize,
    pub page_size: usize,
    /// Recurrent-state slots (0: the model keeps none, and a batch names none).
    pub state_slots: usize,
    /// Pages of the sliding-window layers' pool (0: the backend keeps none).
    pub window_pages: usize,
}

/// Layers that look back a bounded number of positions, which a backend can keep in a pool
/// of pages of their own ([`Backend::kv_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvWindow {
    /// Positions a query of any of these layers reads, itself included.
    pub tokens: usize,
    /// Their share of [`Backend::kv_bytes_per_token`].
    pub bytes_per_token: usize,
}

/// Rejects a batch no backend can run, before anything is written: a token outside the
/// vocabulary, a sequence with no tokens, a block table that does not cover the sequence's
/// positions or names a page outside the pool, a missing or unknown state slot (or two
/// sequences in one). Every backend calls this first, so they refuse
/// the same batches with the same messages.
pub fn validate_batch(batch: &[SeqBatch<'_>], limits: BatchLimits) -> Result<(), BackendError> {
    let BatchLimits {
        vocab_size,
        num_pages,
        page_size,
        state_slots,
        window_pages,
    } = limits;
    let mut slots_seen = Vec::new();
    for (i, seq) in batch.iter().enumerate() {
        match (seq.state_slot, state_slots) {
            (None, 0) => {}
            (Some(slot), _) if (slot as usize) < state_slots => {
                if slots_seen.contains(&slot) {
                    return Err(BackendError(format!(
                        "sequence {i}: state slot {slot} is another sequence's too"
                    )));
                }
                slots_seen.push(slot);
            }
            (None, _) => {
                return Err(BackendError(format!(
                    "sequence {i} has no state slot (the model keeps recurrent state)"
                )))
            }
            (Some(slot), _) => {
                return Err(BackendError(format!(
                    "sequence {i}: state slot {slot} is outside the {state_slots} slots"
                )))
            }
        }
        let copy = seq.state_copy;
        for other in [copy.restore_from, copy.save_to].into_iter().flatten() {
            if seq.state_slot.is_none()
                || other as usize >= state_slots
                || seq.state_slot == Some(other)
            {
                return Err(BackendError(format!(
                    "sequence {i}: state copy with slot {other} (its own slot {:?}, {state_slots} slots)",
                    seq.state_slot
                )));
            }
        }
        if copy.rewindable && copy.save_to.is_some() {
            return Err(BackendError(format!(
                "sequence {i}: a snapshot saved after a step that may be rewound"
            )));
        }
        if copy.restore_from.is_some() && seq.start_pos == 0 {
            return Err(BackendError(format!(
                "sequence {i}: a state restored at position 0"
            )));
        }
        if let Some(save) = copy.save_to {
            if slots_seen.contains(&save) {
                return Err(BackendError(format!(
                    "sequence {i}: state slot {save} is another sequence's too"
                )));
            }
            slots_seen.push(save);
        }
        if let Some(&bad) = seq.tokens.iter().find(|&&t| t as usize >= vocab_size) {
            return Err(BackendError(format!(
                "sequence {i}: token id {bad} is outside the vocabulary ({vocab_size})"
            )));
        }
        if seq.tokens.is_empty() {
            return Err(BackendError(format!("sequence {i} has no tokens")));
        }
        let end = seq.start_pos + seq.tokens.len();
        let needed = end.div_ceil(page_size);
        if seq.block_table.len() < needed {
            return Err(BackendError(format!(
                "sequence {i}: block table has {} pages, positions 0..{end} need {needed}",
                seq.block_table.len()
            )));
        }
        if let Some(&bad) = seq.block_table[..needed]
            .iter()
            .find(|&&p| p as usize >= num_pages)
        {
            return Err(BackendError(format!(
                "sequence {i}: page {bad} is outside the KV pool ({num_pages} pages)"
            )));
        }
        if window_pages > 0 {
            check_window_table(i, seq, needed, window_pages, page_size)?;
        }
    }
    Ok(())
}

/// A window table covers the sequence's positions, names pages of the window pool, and gives
/// a real page (not the null page 0) to every position the step writes.
fn check_window_table(
    i: usize,
    seq: &SeqBatch<'_>,
    needed: usize,
    window_pages: usize,
    page_size: usize,
) -> Result<(), BackendError> {
    let table = seq.window_table;
    if table.len() < needed {
        return Err(BackendError(format!(
            "sequence {i}: window table has {} pages, {needed} needed",
            table.len()
        )));
    }
    if let Some(&bad) = table[..needed]
        .iter()
        .find(|&&p| p as usize >= window_pages)
    {
        return Err(BackendError(format!(
            "sequence {i}: window page {bad} is outside the pool ({window_pages} pages)"
        )));
    }
    let written = seq.start_pos / page_size..needed;
    if table[written].contains(&0) {
        return Err(BackendError(format!(
            "sequence {i}: the null window page where the step writes"
        )));
    }
    Ok(())
}

/// Logits of one step: rows in batch order (a `Last` sequence contributes one row, an `All`
/// sequence `tokens.len()` rows, a `None` sequence none), each `vocab_size` long.
#[derive(Debug, Default, Clone)]
pub struct ForwardOutput {
    pub logits: Vec<f32>,
    pub vocab_size: usize,
}

impl ForwardOutput {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.logits[i * self.vocab_size..(i + 1) * self.vocab_size]
    }
    pub fn num_rows(&self) -> usize {
        self.logits.len().checked_div(self.vocab_size).unwrap_or(0)
    }
}

/// How a backend that samples on its own device picks one sequence's next token (see
/// [`Backend::forward_sampled`]). The engine delegates only what needs no host state: requests
/// with penalties or logprobs keep sampling on the host from a logits row.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSampling {
    /// Below 1e-5: greedy (argmax, ties to the lowest id), as the host sampler.
    pub temperature: f32,
    /// 0 disables top-k.
    pub top_k: u32,
    /// 1 disables top-p.
    pub top_p: f32,
    /// 0 disables min-p.
    pub min_p: f32,
    /// Key of the request's counter-based RNG (its `seed`, or one drawn at arrival).
    pub seed: u64,
    /// Tokens the request has generated so far: each step draws a fresh stream, and the same
    /// (seed, counter) gives the same token whatever else shares the step.
    pub counter: u64,
    /// A constrained sequence's allowed tokens: every other token must be impossible to
    /// sample. Only for backends that say [`Backend::can_sample_masked`].
    pub mask: Option<DeviceMask>,
}

/// A step in which the backend sampled some sequences itself.
#[derive(Debug, Default, Clone)]
pub struct SampledOutput {
    /// Logits rows as [`Backend::forward`] returns them, for the sequences NOT sampled on the
    /// backend (their rows only, in batch order).
    pub forward: ForwardOutput,
    /// One entry per sequence of the batch: the sampled token where sampling was asked for.
    pub tokens: Vec<Option<u32>>,
}

/// A model that runs batched forward passes over a paged KV cache it owns.
///
/// Contract: results should be *batch-invariant*: a sequence's logits do not depend on which
/// other sequences share the step, nor on how its prompt was split into chunks. The CPU
/// backend always is; CUDA with `--batch-invariant` (its batch-dependent kernels, the
/// default, are much faster and may round a near-tie the other way).
pub trait Backend: Send {
    fn vocab_size(&self) -> usize;
    /// Bytes of KV cache one token takes across all layers (K and V).
    fn kv_bytes_per_token(&self) -> usize;
    /// The context length the model was trained for.
    fn max_context_len(&self) -> usize;
    /// Allocate the KV pool. Called once, before the first `forward` (and after
    /// `init_window_kv_cache`, if that is called).
    fn init_kv_cache(&mut self, num_pages: usize, page_size: usize) -> Result<(), BackendError>;
    /// The model's sliding-window layers, if the backend can keep their pages apart.
    fn kv_window(&self) -> Option<KvWindow> {
        None
    }
    /// Keep the layers of `kv_window` in a pool of `pages` pages of their own, addressed by
    /// [`SeqBatch::window_table`]; the pool of `init_kv_cache` then holds only the other
    /// layers. Not called: every layer lives in the one pool.
    fn init_window_kv_cache(&mut self, pages: usize) -> Result<(), BackendError> {
        let _ = pages;
        Err(BackendError(
            "this backend keeps no separate window pages".into(),
        ))
    }
    /// Bytes of recurrent state one sequence needs (each linear-attention layer's
    /// convolution window and delta-rule state); 0 for a model of attention layers only.
    fn state_bytes_per_sequence(&self) -> usize {
        0
    }
    /// Allocate `slots` recurrent-state slots (see [`SeqBatch::state_slot`]). Called once,
    /// before the first `forward`, when `state_bytes_per_sequence` is not 0.
    fn init_state_slots(&mut self, slots: usize) -> Result<(), BackendError> {
        let _ = slots;
        Err(BackendError("this backend keeps no recurrent state".into()))
    }
    /// Bytes that rewinding one sequence's step of at most `step_tokens` tokens takes
    /// ([`StateCopy::rewindable`]: the state before the step, the step's inputs to the
    /// recurrent layers); `None` where the backend cannot rewind, and a model with recurrent
    /// state then runs no speculative decoding.
    fn state_rewind_bytes_per_sequence(&self, step_tokens: usize) -> Option<usize> {
        let _ = step_tokens;
        None
    }
    /// Keep what rewinding a step of at most `step_tokens` tokens takes, for the sequences of
    /// seat slots `0..seats` (the engine's seats are the first state slots). Called after
    /// `init_state_slots` when speculative decoding is on, before `init_kv_cache`.
    fn init_state_rewind(&mut self, seats: usize, step_tokens: usize) -> Result<(), BackendError> {
        let _ = (seats, step_tokens);
        Err(BackendError(
            "this backend cannot rewind recurrent state".into(),
        ))
    }
    /// Whether the backend has a draft head to run: the checkpoint's multi-token-prediction
    /// layer (`--speculative mtp`) or an EAGLE-3 head it was given (`--speculative eagle3`).
    fn has_draft_head(&self) -> bool {
        false
    }
    /// Run the draft head from now on: its K/V (one layer more in `kv_bytes_per_token`)
    /// follows every step, ready for [`Backend::head_draft`]. Called before `init_kv_cache`.
    fn enable_draft_head(&mut self) -> Result<(), BackendError> {
        Err(BackendError(
            "this backend has no draft head (no multi-token-prediction layer in the \
             checkpoint, no EAGLE-3 head given)"
                .into(),
        ))
    }
    /// Whether the enabled draft head keeps hidden rows per sequence in state slots on a model
    /// without recurrent state: the engine then gives every running sequence a slot
    /// (`init_state_slots`), without the snapshots that would turn prefix caching off.
    fn draft_head_needs_slots(&self) -> bool {
        false
    }
    /// Draft steps of the draft head, one logits row each (over the whole vocabulary), in
    /// order.
    fn head_draft(&mut self, steps: &[HeadDraftStep<'_>]) -> Result<ForwardOutput, BackendError> {
        let _ = steps;
        Err(BackendError("no draft head".into()))
    }
    /// Write the K/V of every token in `batch` into its pages and return the requested logits.
    fn forward(&mut self, batch: &[SeqBatch<'_>]) -> Result<ForwardOutput, BackendError>;

    /// Whether [`Backend::forward_sampled`] is available. A backend that samples on its device
    /// sends token ids, not vocabulary-wide logits rows, back to the host.
    fn can_sample(&self) -> bool {
        false
    }

    /// Whether [`Backend::forward_sampled`] honours [`DeviceSampling::mask`] (constrained
    /// sequences are sampled on the host otherwise).
    fn can_sample_masked(&self) -> bool {
        false
    }

    /// As [`Backend::forward`], except that each sequence `i` with `sampling[i] = Some(..)`
    /// (the engine asks only for `LogitsRequest::Last` sequences) gets its next token chosen by
    /// the backend and contributes no logits row. `sampling` has one entry per sequence.
    fn forward_sampled(
        &mut self,
        _batch: &[SeqBatch<'_>],
        _sampling: &[Option<DeviceSampling>],
    ) -> Result<SampledOutput, BackendError> {
        Err(BackendError("this backend does not sample".into()))
    }

    /// The counters of tokens routed to each expert, for a model with mixture-of-experts
    /// layers (shared with /metrics; the backend adds to them as it runs).
    fn expert_load_counters(&self) -> Option<Arc<ExpertLoad>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(state_slot: Option<u32>) -> SeqBatch<'static> {
        SeqBatch {
            tokens: &[1, 2],
            start_pos: 0,
            block_table: &[0],
            window_table: &[],
            state_slot,
            state_copy: StateCopy::default(),
            logits: LogitsRequest::Last,
        }
    }

    fn limits(state_slots: usize) -> BatchLimits {
        BatchLimits {
            vocab_size: 10,
            num_pages: 4,
            page_size: 4,
            state_slots,
            window_pages: 0,
        }
    }

    #[test]
    fn state_slots_are_required_known_and_unshared() {
        assert!(validate_batch(&[seq(None)], limits(0)).is_ok());
        assert!(validate_batch(&[seq(Some(0)), seq(Some(1))], limits(2)).is_ok());
        let error =
            |batch: &[SeqBatch<'_>], slots| validate_batch(batch, limits(slots)).unwrap_err().0;
        assert!(error(&[seq(None)], 2).contains("no state slot"));
        assert!(error(&[seq(Some(2))], 2).contains("outside the 2 slots"));
        assert!(error(&[seq(Some(0))], 0).contains("outside the 0 slots"));
        assert!(error(&[seq(Some(1)), seq(Some(1))], 2).contains("another sequence's"));
        let copying = |restore_from, save_to| SeqBatch {
            start_pos: 2,
            state_copy: StateCopy {
                restore_from,
                save_to,
                ..StateCopy::default()
            },
            ..seq(Some(0))
        };
        assert!(validate_batch(&[copying(Some(1), Some(2))], limits(3)).is_ok());
        assert!(error(&[copying(Some(0), None)], 3).contains("state copy"));
        assert!(error(&[copying(None, Some(3))], 3).contains("state copy"));
        let at_zero = SeqBatch {
            start_pos: 0,
            ..copying(Some(1), None)
        };
        assert!(error(&[at_zero], 3).contains("position 0"));
        assert!(error(&[copying(None, Some(1)), seq(Some(1))], 3).contains("another"));
        let rewindable = |save_to| SeqBatch {
            state_copy: StateCopy {
                save_to,
                rewindable: true,
                ..StateCopy::default()
            },
            ..seq(Some(0))
        };
        assert!(validate_batch(&[rewindable(None)], limits(3)).is_ok());
        assert!(error(&[rewindable(Some(1))], 3).contains("may be rewound"));
    }

    #[test]
    fn window_tables_cover_the_step_and_write_to_real_pages() {
        let windowed = |start_pos, window_table| SeqBatch {
            tokens: &[1, 2],
            start_pos,
            block_table: &[0, 1, 2],
            window_table,
            ..seq(None)
        };
        let with_pool = BatchLimits {
            window_pages: 3,
            ..limits(0)
        };
        let check = |s: SeqBatch<'_>| validate_batch(&[s], with_pool).map_err(|e| e.0);
        // Positions 8..10: page 2 written, pages 0 and 1 behind the window may be null.
        assert!(check(windowed(8, &[0, 0, 2])).is_ok());
        assert!(check(windowed(8, &[0, 0]))
            .unwrap_err()
            .contains("window table has 2"));
        assert!(check(windowed(8, &[0, 0, 3]))
            .unwrap_err()
            .contains("outside the pool"));
        assert!(check(windowed(8, &[1, 2, 0]))
            .unwrap_err()
            .contains("null window page"));
        // Without a window pool the table is not looked at.
        assert!(validate_batch(&[windowed(8, &[])], limits(0)).is_ok());
    }
}
