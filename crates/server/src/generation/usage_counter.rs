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
    /// (kept, drafted) drafts of a request with a `prediction`; `None`: no prediction.
    predicted: Option<(usize, usize)>,
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
        self.predicted = predicted.then_some((0, 0));
        self
    }

    /// Another prompt's choices (with as many choices per prompt).
    pub(super) fn append(&mut self, other: UsageCounter) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens.extend(other.cached_tokens);
        if let (Some(mine), Some(theirs)) = (&mut self.predicted, other.predicted) {
            mine.0 += theirs.0;
            mine.1 += theirs.1;
        }
    }

    pub(super) fn observe(&mut self, choice: usize, delta: &Delta) {
        self.completion_tokens += delta.token_ids.len();
        if let (Some(p), Some(cached)) = (&delta.prompt, self.cached_tokens.get_mut(choice)) {
            *cached = p.num_cached_tokens;
        }
        if let (Some(predicted), Some(s)) = (&mut self.predicted, delta.speculation) {
            predicted.0 += s.accepted;
            predicted.1 += s.drafted;
        }
    }

    pub(super) fn usage(&self) -> Usage {
        let n = self.choices_per_prompt.max(1);
        let cached = self.cached_tokens.iter().step_by(n).sum();
        Usage {
            completion_tokens_details: self.predicted.map(|(kept, drafted)| {
                CompletionTokensDetails {
                    accepted_prediction_tokens: kept,
                    rejected_prediction_tokens: drafted - kept,
                }
            }),
            ..Usage::new(self.prompt_tokens, self.completion_tokens, cached)
        }
    }
}
