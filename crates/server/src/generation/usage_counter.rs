//! A request's token usage, counted from its choices' deltas as they arrive (so a stream's
//! usage chunk and a complete answer's `usage` agree).

use crate::openai::usage::{CompletionTokensDetails, Usage};
use crate::text::messages::Delta;

/// Counts a request's usage from its choices' deltas: each prompt once (its `n` choices share
/// it, and the cached tokens are those of its first choice), the completions of every choice.
pub(super) struct UsageCounter {
    prompt_tokens: usize,
    choices_per_prompt: usize,
    completion_tokens: usize,
    /// Per choice, from the delta that carries the prompt.
    cached_tokens: Vec<usize>,
    /// Per choice, (kept, drafted) drafts so far of a request with a `prediction` (each
    /// delta carries its choice's running totals, so a choice a stop string ends still
    /// counts its drafts); `None`: no prediction.
    predicted: Option<Vec<(usize, usize)>>,
}

impl UsageCounter {
    pub(super) fn new(prompt_tokens: usize, choices: usize) -> Self {
        Self {
            prompt_tokens,
            choices_per_prompt: choices,
            completion_tokens: 0,
            cached_tokens: vec![0; choices],
            predicted: None,
        }
    }

    /// The request drafts from a `prediction`: the usage counts them.
    pub(super) fn with_prediction(mut self, predicted: bool) -> Self {
        self.predicted = predicted.then(|| vec![(0, 0); self.cached_tokens.len()]);
        self
    }

    /// Another prompt's choices (with as many choices per prompt).
    pub(super) fn append(&mut self, other: UsageCounter) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens.extend(other.cached_tokens);
        if let (Some(mine), Some(theirs)) = (&mut self.predicted, other.predicted) {
            mine.extend(theirs);
        }
    }

    pub(super) fn observe(&mut self, choice: usize, delta: &Delta) {
        self.completion_tokens += delta.token_ids.len();
        if let (Some(p), Some(cached)) = (&delta.prompt, self.cached_tokens.get_mut(choice)) {
            *cached = p.num_cached_tokens;
        }
        let predicted = self.predicted.as_mut().and_then(|p| p.get_mut(choice));
        if let (Some(predicted), Some(s)) = (predicted, delta.speculation) {
            *predicted = (s.accepted, s.drafted);
        }
    }

    pub(super) fn usage(&self) -> Usage {
        let n = self.choices_per_prompt.max(1);
        let cached = self.cached_tokens.iter().step_by(n).sum();
        Usage {
            completion_tokens_details: self.predicted.as_ref().map(|choices| {
                let kept: usize = choices.iter().map(|c| c.0).sum();
                let drafted: usize = choices.iter().map(|c| c.1).sum();
                CompletionTokensDetails {
                    accepted_prediction_tokens: kept,
                    rejected_prediction_tokens: drafted - kept,
                }
            }),
            ..Usage::new(self.prompt_tokens, self.completion_tokens, cached)
        }
    }
}

#[cfg(test)]
mod tests {
    use ferrite_engine::SpecSummary;

    use super::*;

    fn delta(tokens: usize, drafted: usize, accepted: usize) -> Delta {
        Delta {
            text: String::new(),
            token_ids: vec![1; tokens],
            logprobs: Vec::new(),
            prompt: None,
            finish: None,
            stop_reason: None,
            speculation: Some(SpecSummary {
                rounds: 1,
                drafted,
                accepted,
            }),
        }
    }

    /// Each delta carries its choice's running totals: the latest counts, per choice, and a
    /// choice cut short (no final engine output) still reports what it drafted.
    #[test]
    fn predicted_drafts_are_each_choices_latest_totals() {
        let mut usage = UsageCounter::new(10, 2).with_prediction(true);
        usage.observe(0, &delta(3, 4, 2));
        usage.observe(0, &delta(2, 8, 5));
        usage.observe(1, &delta(1, 3, 3));
        let details = usage.usage().completion_tokens_details.unwrap();
        assert_eq!(details.accepted_prediction_tokens, 5 + 3);
        assert_eq!(details.rejected_prediction_tokens, (8 - 5) + (3 - 3));
        assert_eq!(usage.usage().completion_tokens, 6);
    }
}
