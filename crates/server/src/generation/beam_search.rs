//! Beam search (vLLM's `use_beam_search`), run above the engine as vLLM runs it: each step
//! asks the engine for one greedy token of every live beam with the `2·width` most likely
//! next tokens and their logprobs, extends the beams by those, keeps the `width` best by
//! score, and sets aside the extensions that end (EOS). The step's requests share the prompt's
//! pages and their beams' through the prefix cache, so a step computes about one page a beam.
//!
//! The score is vLLM's: the cumulative logprob over `len ^ length_penalty`, where `len` counts
//! the prompt and the generated tokens, less a final EOS.

use std::future::Future;
use std::sync::Arc;

use super::submit::{submit, PromptTokens, SubmitOptions, Submitted};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::openai::sampling::ValidatedSampling;

/// What a beam search is asked for.
#[derive(Debug, Clone, Copy)]
pub struct BeamOptions {
    pub width: usize,
    pub max_tokens: usize,
    pub length_penalty: f64,
    /// Beams do not end on EOS.
    pub ignore_eos: bool,
    pub eos: Option<u32>,
}

/// One hypothesis: its generated tokens and their summed logprob.
#[derive(Debug, Clone, PartialEq)]
pub struct Beam {
    pub tokens: Vec<u32>,
    pub cum_logprob: f64,
    /// It ended on EOS.
    pub ended: bool,
}

impl BeamOptions {
    /// The beam's score, as vLLM's `get_beam_search_score`.
    pub fn score(&self, prompt_len: usize, beam: &Beam) -> f64 {
        let len = prompt_len + beam.tokens.len() - usize::from(beam.ended);
        beam.cum_logprob / (len.max(1) as f64).powf(self.length_penalty)
    }

    /// One step: every live beam extended by each of its candidates `(token, logprob)`; the
    /// extensions that end go to `ended`, the `width` best of the others live on.
    pub fn advance(
        &self,
        prompt_len: usize,
        beams: &[Beam],
        candidates: &[Vec<(u32, f32)>],
        ended: &mut Vec<Beam>,
    ) -> Vec<Beam> {
        let mut next = Vec::new();
        for (beam, candidates) in beams.iter().zip(candidates) {
            for &(token, logprob) in candidates {
                let mut tokens = beam.tokens.clone();
                tokens.push(token);
                let extended = Beam {
                    tokens,
                    cum_logprob: beam.cum_logprob + logprob as f64,
                    ended: !self.ignore_eos && Some(token) == self.eos,
                };
                match extended.ended {
                    true => ended.push(extended),
                    false => next.push(extended),
                }
            }
        }
        self.sort(prompt_len, &mut next);
        next.truncate(self.width);
        next
    }

    /// Best first; equal scores keep their order (stable).
    pub fn sort(&self, prompt_len: usize, beams: &mut [Beam]) {
        beams.sort_by(|a, b| {
            self.score(prompt_len, b)
                .total_cmp(&self.score(prompt_len, a))
        });
    }
}

/// The prompts of one step: the prompt followed by each live beam's tokens.
struct StepPrompts(Vec<Vec<u32>>);

impl PromptTokens for StepPrompts {
    fn token_ids(&self) -> Vec<&[u32]> {
        self.0.iter().map(Vec::as_slice).collect()
    }
}

/// The `width` best beams after `prompt`, best first. `base` is the request's validated
/// sampling (its other fields checked by the route); each step asks for one greedy token.
pub async fn beam_search(
    state: &Arc<AppState>,
    prompt: &[u32],
    base: &ValidatedSampling,
    options: BeamOptions,
) -> Result<Vec<Beam>, ApiError> {
    let step = |prompts: Vec<Vec<u32>>| {
        let mut sampling = base.clone();
        sampling.n = 1;
        sampling.max_tokens = Some(1);
        sampling.stop.clear();
        sampling.params.temperature = 0.0;
        sampling.params.seed = None;
        sampling.params.logprobs = Some(2 * options.width);
        sampling.params.ignore_eos = true;
        async move {
            let prompts = async { Ok(StepPrompts(prompts)) };
            let Submitted { submission, .. } =
                submit(state, prompts, &mut sampling, SubmitOptions::default()).await?;
            let (results, _) = submission.collect().await?;
            Ok(results
                .iter()
                .map(|r| match r.logprobs.first() {
                    Some(entry) if !entry.top.is_empty() => {
                        entry.top.iter().map(|(t, lp)| (t.id, *lp)).collect()
                    }
                    Some(entry) => vec![(entry.token.id, entry.logprob)],
                    None => Vec::new(),
                })
                .collect())
        }
    };
    search(prompt, options, step).await
}

/// The search itself, over a `step` that gives each prompt's candidate next tokens.
async fn search<F, Fut>(
    prompt: &[u32],
    options: BeamOptions,
    mut step: F,
) -> Result<Vec<Beam>, ApiError>
where
    F: FnMut(Vec<Vec<u32>>) -> Fut,
    Fut: Future<Output = Result<Vec<Vec<(u32, f32)>>, ApiError>>,
{
    let mut live = vec![Beam {
        tokens: Vec::new(),
        cum_logprob: 0.0,
        ended: false,
    }];
    let mut ended = Vec::new();
    for _ in 0..options.max_tokens {
        if live.is_empty() {
            break;
        }
        let prompts = live
            .iter()
            .map(|b| prompt.iter().chain(&b.tokens).copied().collect())
            .collect();
        let candidates = step(prompts).await?;
        live = options.advance(prompt.len(), &live, &candidates, &mut ended);
    }
    ended.extend(live);
    options.sort(prompt.len(), &mut ended);
    ended.truncate(options.width);
    Ok(ended)
}

#[cfg(test)]
mod tests;
