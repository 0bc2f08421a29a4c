//! A request's token usage, counted from its choices' deltas as they arrive (so a stream's
//! usage chunk and a complete answer's `usage` agree).

use crate::openai::usage::Usage;
use crate::text::messages::Delta;

/// Counts a request's usage from its choices' deltas: each prompt once (its `n` choices share
/// it, and the cached tokens are those of its first choice), the completions of every choice.
pub(super) struct UsageCounter {
    prompt_tokens: usize,
    choices_per_prompt: usize,
    completion_tokens: usize,
    /// Per choice, from the delta that carries the prompt.
    cached_tokens: Vec<usize>,
}

impl UsageCounter {
    pub(super) fn new(prompt_tokens: usize, choices: usize) -> Self {
        Self {
            prompt_tokens,
            choices_per_prompt: choices,
            completion_tokens: 0,
            cached_tokens: vec![0; choices],
        }
    }

    /// Another prompt's choices (with as many choices per prompt).
    pub(super) fn append(&mut self, other: UsageCounter) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens.extend(other.cached_tokens);
    }

    pub(super) fn observe(&mut self, choice: usize, delta: &Delta) {
        self.completion_tokens += delta.token_ids.len();
        if let (Some(p), Some(cached)) = (&delta.prompt, self.cached_tokens.get_mut(choice)) {
            *cached = p.num_cached_tokens;
        }
    }

    pub(super) fn usage(&self) -> Usage {
        let n = self.choices_per_prompt.max(1);
        let cached = self.cached_tokens.iter().step_by(n).sum();
        Usage::new(self.prompt_tokens, self.completion_tokens, cached)
    }
}
