//! Structured outputs' token masks, computed on helper threads while the forward pass runs:
//! a grammar's mask depends only on the tokens already accepted, not on this step's logits,
//! so the scheduler thread does not wait for it after the forward pass.

use std::thread::{Scope, ScopedJoinHandle};

use crate::constraint::MaskJob;
use crate::scheduler::StepPlan;
use crate::sequence::Sequence;

/// Helper threads at most per step (each takes a share of the constrained sequences).
const MAX_WORKERS: usize = 4;

/// The mask jobs of the plan's constrained sequences whose next token this step samples.
pub fn due_jobs(
    plan: &StepPlan,
    running: &[Sequence],
    vocab_size: usize,
    eos_token_ids: &[u32],
) -> Vec<MaskJob> {
    plan.chunks
        .iter()
        .filter_map(|chunk| {
            let sequence = &running[chunk.index];
            let samples = chunk.drafts == 0 && chunk.start + chunk.len == sequence.tokens().len();
            let constraint = sequence.constraint.as_ref().filter(|_| samples)?;
            let end_ids = sequence.params.end_token_ids(eos_token_ids);
            Some(constraint.mask_job(vocab_size, end_ids))
        })
        .collect()
}

/// Starts `jobs` on up to [`MAX_WORKERS`] threads of `scope`; join them before the commit.
/// A job that panics poisons its sequence's constraint (which then fails, never goes
/// unconstrained), so the handles' results need no checking.
pub fn spawn<'scope>(
    scope: &'scope Scope<'scope, '_>,
    mut jobs: Vec<MaskJob>,
) -> Vec<ScopedJoinHandle<'scope, ()>> {
    let workers = jobs.len().min(MAX_WORKERS);
    let mut handles = Vec::with_capacity(workers);
    for w in (0..workers).rev() {
        let share = jobs.split_off(jobs.len() * w / workers);
        handles.push(scope.spawn(move || share.into_iter().for_each(MaskJob::run)));
    }
    handles
}
