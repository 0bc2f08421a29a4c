//! vLLM's request fields that shape a request's text rather than its sampling: how much of the
//! prompt the model reads (`truncate_prompt_tokens`) and how the generated tokens are written
//! out (`include_stop_str_in_output`, `spaces_between_special_tokens`). They travel in
//! [`super::sampling::SamplingFields`], as they do in vLLM's `SamplingParams`.

use crate::error::ApiError;

/// `truncate_prompt_tokens`: keep only the prompt's last tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptTruncation {
    /// The last N tokens.
    Last(usize),
    /// `-1`: the last `--max-model-len` tokens (vLLM's "the model's truncation size").
    ModelLength,
}

impl PromptTruncation {
    /// vLLM's range: -1, or a count of at least 1 (0 would leave no prompt at all).
    pub fn parse(value: i64) -> Result<Self, ApiError> {
        match value {
            -1 => Ok(Self::ModelLength),
            n if n >= 1 => Ok(Self::Last(n as usize)),
            n => Err(ApiError::invalid_param(
                "truncate_prompt_tokens",
                format!("truncate_prompt_tokens must be -1 or at least 1, got {n}"),
            )),
        }
    }

    /// How many tokens are kept for a model whose context is `max_len` tokens; more than the
    /// context is a 400, as vLLM answers.
    pub fn keep(self, max_len: usize) -> Result<usize, ApiError> {
        match self {
            Self::ModelLength => Ok(max_len),
            Self::Last(n) if n > max_len => Err(ApiError::invalid_param(
                "truncate_prompt_tokens",
                format!(
                    "truncate_prompt_tokens value ({n}) is greater than max_model_len \
                     ({max_len}). Please select a smaller truncation size."
                ),
            )),
            Self::Last(n) => Ok(n),
        }
    }
}

/// Drops all but the last `keep` ids.
pub fn keep_last(ids: &mut Vec<u32>, keep: usize) {
    if ids.len() > keep {
        ids.drain(..ids.len() - keep);
    }
}

/// How a validated request's text is cut and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// A matched stop string stays at the end of the text (vLLM's default: it does not).
    pub include_stop_str_in_output: bool,
    /// vLLM's default true: the tokenizer's own text for special tokens kept in the output.
    pub spaces_between_special_tokens: bool,
    pub truncate_prompt_tokens: Option<PromptTruncation>,
}

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            include_stop_str_in_output: false,
            spaces_between_special_tokens: true,
            truncate_prompt_tokens: None,
        }
    }
}

impl TextOptions {
    pub fn new(
        include_stop_str_in_output: Option<bool>,
        spaces_between_special_tokens: Option<bool>,
        truncate_prompt_tokens: Option<i64>,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            include_stop_str_in_output: include_stop_str_in_output.unwrap_or(false),
            spaces_between_special_tokens: spaces_between_special_tokens.unwrap_or(true),
            truncate_prompt_tokens: truncate_prompt_tokens
                .map(PromptTruncation::parse)
                .transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_the_last_tokens_and_refuses_what_vllm_refuses() {
        let mut ids = vec![1, 2, 3, 4, 5];
        keep_last(&mut ids, 2);
        assert_eq!(ids, vec![4, 5]);
        keep_last(&mut ids, 9);
        assert_eq!(ids, vec![4, 5]);
        assert_eq!(PromptTruncation::parse(-1).unwrap().keep(64).unwrap(), 64);
        assert_eq!(PromptTruncation::parse(3).unwrap().keep(64).unwrap(), 3);
        let too_many = PromptTruncation::parse(65).unwrap().keep(64).unwrap_err();
        assert_eq!(too_many.param.as_deref(), Some("truncate_prompt_tokens"));
        for bad in [0, -2] {
            let e = PromptTruncation::parse(bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("truncate_prompt_tokens"));
        }
    }

    #[test]
    fn defaults_are_vllm_s() {
        let t = TextOptions::new(None, None, None).unwrap();
        assert_eq!(t, TextOptions::default());
        assert!(!t.include_stop_str_in_output && t.spaces_between_special_tokens);
    }
}
