//! The commit of a chunk that scored drafts: verify them against the target's rows, then
//! emit the accepted drafts and the token after them, up to a finish (an end token, the
//! length, or, under a constraint, the grammar's completion).

use super::constrained::GrammarProgress;
use super::speculation::Speculation;
use super::verify::Verdict;
use crate::backend::ForwardOutput;
use crate::request::{EngineOutput, FinishReason};
use crate::sampler::{token_logprob, Sampler};
use crate::scheduler::ChunkOutcome;
use crate::sequence::Sequence;

/// Decides what the target keeps of `sequence`'s drafts (its chunk's rows start at
/// `first_row`). The sequence itself is left as it is: [`crate::scheduler::Scheduler::commit`]
/// applies the returned outcome.
pub fn accept_drafts(
    speculation: Option<&mut Speculation>,
    sequence: &mut Sequence,
    forward: &ForwardOutput,
    first_row: usize,
    eos_token_ids: &[u32],
    max_model_len: usize,
) -> (ChunkOutcome, EngineOutput) {
    let (verdict, grammar) = match speculation {
        Some(speculation) => speculation.verify(sequence, forward, first_row, eos_token_ids),
        // Unreachable in practice (drafts only come from a speculation); rejecting them all
        // and sampling from the first row is still exact.
        None => {
            let output_len = sequence.num_verified() - sequence.num_prompt_tokens;
            let parts = sequence.sampling_parts();
            let (prompt, rest) = parts.prompt_and_rest();
            let row = forward.row(first_row);
            let next = Sampler::new(eos_token_ids).sample(
                row,
                parts.params,
                prompt,
                &rest[..output_len],
                parts.rng,
            );
            (Verdict { accepted: 0, next }, GrammarProgress::default())
        }
    };
    if let Some(error) = grammar.failed {
        // An unconstrained token would break the promise that the output matches.
        tracing::warn!("request {}: {error}; ending it", sequence.id);
        let outcome = ChunkOutcome {
            accepted_drafts: 0,
            next_token: None,
            finished: true,
        };
        return (outcome, sequence.final_output(FinishReason::Stop));
    }
    let verified = sequence.num_verified();
    let accepted = &sequence.tokens()[verified..verified + verdict.accepted];
    let mut emitted: Vec<u32> = accepted.to_vec();
    emitted.push(verdict.next);
    let mut output = EngineOutput {
        id: sequence.id,
        prompt: None,
        tokens: Vec::with_capacity(emitted.len()),
        logprobs: Vec::new(),
        finish: None,
        // This round's verdict is recorded: the running totals include it.
        speculation: sequence.spec.summary(),
    };
    for (j, &token) in emitted.iter().enumerate() {
        output.tokens.push(token);
        if let Some(top_n) = sequence.params.logprobs {
            output
                .logprobs
                .push(token_logprob(forward.row(first_row + j), token, top_n));
        }
        output.finish = sequence.finish_reason(token, j + 1, eos_token_ids, max_model_len);
        if j < verdict.accepted && grammar.finished_after == Some(j) {
            output.finish = Some(FinishReason::Stop);
        }
        // The grammar took the accepted drafts during verification; the token after them it
        // takes now (never an end token, which it does not see).
        let after_drafts = j == verdict.accepted && output.finish != Some(FinishReason::Stop);
        if let (true, Some(constraint)) = (after_drafts, sequence.constraint.as_mut()) {
            match constraint.accept(token) {
                Ok(()) if constraint.is_finished() => output.finish = Some(FinishReason::Stop),
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!("request {}: {e}; ending it", sequence.id);
                    output.finish = Some(FinishReason::Stop);
                }
            }
        }
        if output.finish.is_some() {
            break;
        }
    }
    // The token after the drafts is appended unless the request ended among them.
    let ended_among_drafts = output.finish.is_some() && output.tokens.len() <= verdict.accepted;
    let outcome = ChunkOutcome {
        accepted_drafts: verdict.accepted,
        next_token: (!ended_among_drafts).then_some(verdict.next),
        finished: output.finish.is_some(),
    };
    (outcome, output)
}
