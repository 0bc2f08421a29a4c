//! Running a planned step on the backend: which sequences it samples itself, a panic caught
//! as an error, and its result checked against the plan before anything is committed.

use std::panic::AssertUnwindSafe;

use crate::backend::{
    Backend, BackendError, DeviceSampling, LogitsRequest, SampledOutput, SeqBatch,
};
use crate::commit::num_rows;
use crate::sampler::{has_penalties, has_rules};
use crate::scheduler::StepPlan;
use crate::sequence::Sequence;

/// Which sequences of the plan the backend samples itself: those whose next token is due
/// and needs no host state (no penalties, no logit rules, no logprobs; a constraint's mask
/// only where the backend applies masks). Empty when the backend cannot. A request with logit
/// rules (`logit_bias`, `min_tokens`, `allowed_token_ids`, `bad_words`) is sampled on the host,
/// so CPU and CUDA give it the same tokens.
pub fn device_sampling(
    backend: &dyn Backend,
    plan: &StepPlan,
    running: &[Sequence],
    eos_token_ids: &[u32],
) -> Vec<Option<DeviceSampling>> {
    if !backend.can_sample() {
        return Vec::new();
    }
    let masks = backend.can_sample_masked();
    plan.chunks
        .iter()
        .map(|chunk| {
            let sequence = &running[chunk.index];
            let params = &sequence.params;
            let delegable = chunk.logits == LogitsRequest::Last
                && !has_penalties(params)
                && !has_rules(params)
                && params.logprobs.is_none()
                && params.infill.is_none()
                && (masks || sequence.constraint.is_none());
            let mask = || {
                let constraint = sequence.constraint.as_ref()?;
                let end_ids = params.end_token_ids(eos_token_ids);
                Some(constraint.device_mask(backend.vocab_size(), end_ids))
            };
            delegable.then(|| DeviceSampling {
                temperature: params.temperature,
                top_k: params.top_k.min(u32::MAX as usize) as u32,
                top_p: params.top_p,
                min_p: params.min_p,
                seed: sequence.device_seed,
                counter: sequence.output().len() as u64,
                mask: mask(),
            })
        })
        .collect()
}

/// Runs the step on the backend: `forward_sampled` when some sequence is sampled there, plain
/// `forward` otherwise. A panicking backend must not take the scheduler thread (and every
/// request) down with it: its batch fails like any backend error.
pub fn forward_catching_panics(
    backend: &mut dyn Backend,
    batch: &[SeqBatch<'_>],
    sampling: &[Option<DeviceSampling>],
) -> Result<SampledOutput, BackendError> {
    let run = || {
        if sampling.iter().any(Option::is_some) {
            backend.forward_sampled(batch, sampling)
        } else {
            backend.forward(batch).map(|forward| SampledOutput {
                forward,
                tokens: vec![None; batch.len()],
            })
        }
    };
    std::panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(BackendError(format!("backend panicked: {message}")))
    })
}

/// A backend that returns the wrong number of rows, or a token outside the vocabulary, would
/// make us emit garbage: refuse it.
pub fn check_shape(
    plan: &StepPlan,
    step: SampledOutput,
    vocab_size: usize,
) -> Result<SampledOutput, BackendError> {
    if step.tokens.len() != plan.chunks.len() {
        return Err(BackendError(format!(
            "backend returned {} token slots for {} sequences",
            step.tokens.len(),
            plan.chunks.len()
        )));
    }
    if let Some(bad) = step
        .tokens
        .iter()
        .flatten()
        .find(|&&t| t as usize >= vocab_size)
    {
        return Err(BackendError(format!(
            "backend sampled token {bad} outside the vocabulary ({vocab_size})"
        )));
    }
    let expected: usize = plan
        .chunks
        .iter()
        .zip(&step.tokens)
        .filter(|(_, token)| token.is_none())
        .map(|(chunk, _)| num_rows(chunk))
        .sum();
    let forward = &step.forward;
    // With no rows asked for, an empty output of any stated width will do.
    let width_ok = forward.vocab_size == vocab_size || expected == 0;
    if !width_ok || forward.logits.len() != expected * vocab_size {
        return Err(BackendError(format!(
            "forward returned {} logits of vocab {}, expected {expected} rows of {vocab_size}",
            forward.logits.len(),
            forward.vocab_size
        )));
    }
    Ok(step)
}
