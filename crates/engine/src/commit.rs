//! The step's commit: from what the forward pass returned (logits rows, or tokens the backend
//! sampled itself) to each sequence's next token, logprobs, finish and output; then one call
//! that lets the scheduler record it all ([`Scheduler::commit`]).

use crate::backend::{ForwardOutput, LogitsRequest, SampledOutput};
use crate::constraint::ConstraintError;
use crate::request::{EngineOutput, FinishReason};
use crate::sampler::{token_logprob, Sampler};
use crate::scheduler::{ChunkOutcome, ScheduledChunk, Scheduler, StepPlan};
use crate::sequence::Sequence;
use crate::speculative::{accept_drafts, Speculation};
use crate::stats::EngineStats;

/// What the commit needs besides the plan and the forward pass's result.
pub struct CommitContext<'a> {
    pub scheduler: &'a mut Scheduler,
    pub speculation: Option<&'a mut Speculation>,
    pub sampler: &'a mut Sampler,
    pub eos_token_ids: &'a [u32],
    pub max_model_len: usize,
    pub stats: &'a EngineStats,
}

/// Commits a step that ran `plan` and returned `step` (already checked against the plan's
/// shape): appends the outputs it produced to `outputs`.
pub fn commit_step(
    ctx: CommitContext<'_>,
    plan: &StepPlan,
    step: &SampledOutput,
    outputs: &mut Vec<EngineOutput>,
) {
    let CommitContext {
        scheduler,
        mut speculation,
        sampler,
        eos_token_ids,
        max_model_len,
        stats,
    } = ctx;
    let forward = &step.forward;
    let running = scheduler.running_all_mut();
    let mut outcomes = Vec::with_capacity(plan.chunks.len());
    let mut first_row = 0;
    let (mut prompt_tokens, mut generated) = (0, 0);
    for (chunk, &device_token) in plan.chunks.iter().zip(&step.tokens) {
        let rows = if device_token.is_some() {
            0
        } else {
            num_rows(chunk)
        };
        let sequence = &mut running[chunk.index];
        let (outcome, output) = if chunk.drafts > 0 {
            let (outcome, output) = accept_drafts(
                speculation.as_deref_mut(),
                sequence,
                forward,
                first_row,
                eos_token_ids,
                max_model_len,
            );
            (outcome, Some(output))
        } else {
            let source = match device_token {
                Some(token) => Some(Next::Sampled(token)),
                None if rows > 0 => Some(Next::Logits(forward.row(first_row + rows - 1))),
                None => None,
            };
            if chunk.logits == LogitsRequest::All {
                gather_prompt_logprobs(sequence, chunk, forward, first_row);
            }
            let ends_prompt_or_decodes = chunk.start + chunk.len == sequence.tokens().len();
            match source {
                Some(next) if ends_prompt_or_decodes => {
                    sample_next(sampler, sequence, next, eos_token_ids, max_model_len)
                }
                _ => (ChunkOutcome::default(), None),
            }
        };
        first_row += rows;
        outcomes.push(outcome);
        if let Some(output) = output {
            generated += output.tokens.len() as u64;
            prompt_tokens += output
                .prompt
                .as_ref()
                .map_or(0, |p| p.num_prompt_tokens as u64);
            outputs.push(output);
        }
    }
    scheduler.commit(plan, &outcomes);
    stats.count_tokens(prompt_tokens, generated);
}

/// Logits rows a chunk asked for.
pub fn num_rows(chunk: &ScheduledChunk) -> usize {
    match chunk.logits {
        LogitsRequest::None => 0,
        LogitsRequest::Last => 1,
        LogitsRequest::All => chunk.len,
    }
}

/// Where a sequence's next token comes from.
#[derive(Clone, Copy)]
enum Next<'a> {
    /// A logits row: the host sampler picks.
    Logits(&'a [f32]),
    /// The backend already picked.
    Sampled(u32),
}

/// Samples the next token of a sequence whose last token was just computed, and decides
/// whether it ends the request.
fn sample_next(
    sampler: &mut Sampler,
    sequence: &mut Sequence,
    next: Next<'_>,
    eos_token_ids: &[u32],
    max_model_len: usize,
) -> (ChunkOutcome, Option<EngineOutput>) {
    let token = match next {
        Next::Logits(logits) => match sample_logits(sampler, sequence, logits, eos_token_ids) {
            Ok(token) => token,
            Err(e) => return constraint_failed(sequence, e),
        },
        Next::Sampled(token) => match check_device_token(sequence, token) {
            Ok(()) => token,
            Err(e) => return constraint_failed(sequence, e),
        },
    };
    // Logprobs are never delegated to the backend, so a request that wants them has a row.
    let logprobs = match (sequence.params.logprobs, next) {
        (Some(top_n), Next::Logits(logits)) => vec![token_logprob(logits, token, top_n)],
        _ => Vec::new(),
    };
    let mut finish = sequence.finish_reason(token, 1, eos_token_ids, max_model_len);
    // The constraint follows every token but the end tokens (EOS, stop ids), which it never
    // sees: the engine, not the grammar, knows which ids end a generation.
    if let Some(constraint) = &mut sequence.constraint {
        if finish != Some(FinishReason::Stop) {
            match constraint.accept(token) {
                Ok(()) if constraint.is_finished() => finish = Some(FinishReason::Stop),
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!("request {}: {e}; ending it", sequence.id);
                    finish = Some(FinishReason::Stop);
                }
            }
        }
    }
    let output = EngineOutput {
        id: sequence.id,
        prompt: sequence.take_prompt_info(),
        tokens: vec![token],
        logprobs,
        finish,
        speculation: sequence.spec.summary(),
    };
    let outcome = ChunkOutcome {
        accepted_drafts: 0,
        next_token: Some(token),
        finished: finish.is_some(),
    };
    (outcome, Some(output))
}

/// The host sampler's pick from a logits row; under a constraint, only among the tokens it
/// allows (its end tokens included where the constraint may end).
fn sample_logits(
    sampler: &mut Sampler,
    sequence: &mut Sequence,
    logits: &[f32],
    eos_token_ids: &[u32],
) -> Result<u32, ConstraintError> {
    let parts = sequence.sampling_parts();
    let (prompt, output) = parts.prompt_and_rest();
    let params = parts.params;
    let Some(constraint) = parts.constraint else {
        return Ok(sampler.sample(logits, params, prompt, output, parts.rng));
    };
    let end_ids = params.end_token_ids(eos_token_ids);
    constraint.with_next_mask(logits.len(), &end_ids, |mask| {
        sampler.sample_masked(logits, mask, params, prompt, output, parts.rng)
    })
}

/// A token the backend sampled under a constraint's mask must be one that mask allows (the
/// same mask, left prepared by the backend): checked, so that a backend fault can never
/// emit a token outside the grammar.
fn check_device_token(sequence: &mut Sequence, token: u32) -> Result<(), ConstraintError> {
    let Some(constraint) = &mut sequence.constraint else {
        return Ok(());
    };
    match constraint.prepared_allows(token)? {
        true => Ok(()),
        false => Err(ConstraintError(format!(
            "the backend sampled token {token}, which the constraint forbids"
        ))),
    }
}

/// A constraint that fails (or allows nothing) ends its request without a token: an
/// unconstrained token would break the promise that the output matches.
fn constraint_failed(
    sequence: &mut Sequence,
    error: ConstraintError,
) -> (ChunkOutcome, Option<EngineOutput>) {
    tracing::warn!("request {}: {error}; ending it", sequence.id);
    let outcome = ChunkOutcome {
        accepted_drafts: 0,
        next_token: None,
        finished: true,
    };
    (outcome, Some(sequence.final_output(FinishReason::Stop)))
}

/// Row `j` of an `All` chunk predicts token `start + j + 1`: record it while that is a prompt token.
fn gather_prompt_logprobs(
    sequence: &mut Sequence,
    chunk: &ScheduledChunk,
    forward: &ForwardOutput,
    first_row: usize,
) {
    let top_n = sequence.params.prompt_logprobs.unwrap_or(0);
    if chunk.start == 0 {
        sequence.prompt_logprobs.clear();
        sequence.prompt_logprobs.push(None);
    }
    for j in 0..chunk.len {
        let next = chunk.start + j + 1;
        if next < sequence.num_prompt_tokens {
            let entry = token_logprob(forward.row(first_row + j), sequence.tokens()[next], top_n);
            sequence.prompt_logprobs.push(Some(entry));
        }
    }
}
