//! A request's own rules over the logits, applied to a copy of the row before penalties,
//! temperature and the filters, in vLLM's order: `allowed_token_ids`, `bad_words`,
//! `min_tokens`, then `logit_bias` (OpenAI's); last, a spent thinking budget forces the
//! reasoning's end token. Reported logprobs stay those of the raw row, as
//! vLLM reports them by default.
//!
//! The rules read the output so far (never the prompt, as in vLLM), so whoever hands the
//! sampler the right output gets them right: the commit, and speculative verification, which
//! hands it the output up to each draft position (its target distribution is the ruled one).

/// What a request asks of the logits besides the sampling rules. Empty: nothing changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogitRules {
    /// OpenAI's `logit_bias`: added to a token's logit before sampling (greedy included).
    /// Ids at or past the vocabulary are ignored (the server refuses them).
    pub logit_bias: Vec<(u32, f32)>,
    /// vLLM's `min_tokens`: the end tokens (EOS unless ignored, and `stop_token_ids`) are
    /// masked until the output holds this many tokens.
    pub min_tokens: usize,
    /// vLLM's `allowed_token_ids`: only these may be sampled. `None`: every token.
    pub allowed_token_ids: Option<Vec<u32>>,
    /// vLLM's `bad_words`, as token sequences: where the output ends with all but the last
    /// token of one, that last token is masked (a one-token word is always masked).
    pub bad_words: Vec<Vec<u32>>,
    /// A reasoning budget (Anthropic's `thinking.budget_tokens`): once the output holds this
    /// many tokens without the reasoning's end token, that token is the only one allowed, so
    /// the reasoning closes and the answer follows.
    pub thinking_budget: Option<ThinkingBudget>,
}

/// See [`LogitRules::thinking_budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkingBudget {
    pub tokens: usize,
    /// The token that ends the reasoning (`</think>`).
    pub end: u32,
}

impl LogitRules {
    /// Whether no rule is set (the logits are used as they are).
    pub fn is_empty(&self) -> bool {
        self.logit_bias.is_empty()
            && self.min_tokens == 0
            && self.allowed_token_ids.is_none()
            && self.bad_words.is_empty()
            && self.thinking_budget.is_none()
    }

    /// Whether `min_tokens` still holds the end tokens back after `output_len` tokens.
    pub fn holds_ends(&self, output_len: usize) -> bool {
        output_len < self.min_tokens
    }

    /// Every token id the rules name (the engine refuses a request naming one past its
    /// vocabulary).
    pub fn token_ids(&self) -> impl Iterator<Item = u32> + '_ {
        let allowed = self.allowed_token_ids.iter().flatten();
        let bias = self.logit_bias.iter().map(|b| &b.0);
        bias.chain(allowed)
            .chain(self.bad_words.iter().flatten())
            .chain(self.thinking_budget.iter().map(|b| &b.end))
            .copied()
    }

    /// Applies the rules to `logits` (a copy of the row) after `output`; `end_ids` are the
    /// tokens that end this sequence (needed only while [`LogitRules::holds_ends`]).
    ///
    /// `allowed_token_ids` is a hard rule; `bad_words` and `min_tokens` yield where, with the
    /// allowed ids (and a structured-output mask already in `logits`), they would leave no
    /// token at all: a token outside every rule would otherwise come out of the dead end.
    pub fn apply(&self, logits: &mut [f32], output: &[u32], end_ids: &[u32]) {
        let vocab = logits.len();
        if let Some(allowed) = &self.allowed_token_ids {
            keep_only(logits, allowed);
        }
        let mut masked: Vec<(usize, f32)> = Vec::new();
        let mut mask = |token: u32| {
            if let Some(logit) = logits.get_mut(token as usize) {
                if *logit > f32::NEG_INFINITY {
                    masked.push((token as usize, *logit));
                    *logit = f32::NEG_INFINITY;
                }
            }
        };
        for word in &self.bad_words {
            if let Some(last) = completes_next(word, output) {
                mask(last);
            }
        }
        if self.holds_ends(output.len()) {
            end_ids.iter().for_each(|&t| mask(t));
        }
        if !masked.is_empty() && !logits.iter().any(|&l| l > f32::NEG_INFINITY) {
            for (token, logit) in masked {
                logits[token] = logit;
            }
        }
        for &(token, bias) in &self.logit_bias {
            if (token as usize) < vocab {
                logits[token as usize] += bias;
            }
        }
        if let Some(budget) = self.thinking_budget {
            if output.len() >= budget.tokens && !output.contains(&budget.end) {
                // The end token's own logit may be -inf under the other rules: it is forced.
                logits.fill(f32::NEG_INFINITY);
                if let Some(end) = logits.get_mut(budget.end as usize) {
                    *end = 0.0;
                }
            }
        }
    }
}

/// The token that would complete `word` right after `output`: its last, when `output` ends
/// with all the others (vLLM's `_apply_bad_words_single_batch`).
fn completes_next(word: &[u32], output: &[u32]) -> Option<u32> {
    let (&last, prefix) = word.split_last()?;
    output.ends_with(prefix).then_some(last)
}

/// Sets every logit but those of `allowed` to -inf.
fn keep_only(logits: &mut [f32], allowed: &[u32]) {
    let kept: Vec<(usize, f32)> = allowed
        .iter()
        .filter_map(|&t| logits.get(t as usize).map(|&l| (t as usize, l)))
        .collect();
    logits.fill(f32::NEG_INFINITY);
    for (token, logit) in kept {
        logits[token] = logit;
    }
}

#[cfg(test)]
mod tests;
