//! The `/v1/completions` request and its four prompt shapes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::request_fields::refuse_unimplemented;
use super::sampling::SamplingFields;
use super::structured::StructuredFields;
use crate::error::ApiError;

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    /// vLLM's: the request's id (in the answer's id and the logs) unless `X-Request-Id` names one.
    pub request_id: Option<String>,
    /// The prompt's text ahead of each choice's text (and, with `logprobs`, its tokens'
    /// logprobs).
    #[serde(default)]
    pub echo: bool,
    /// vLLM's: the tokenizer's special tokens (a BOS) added to a text prompt; default true.
    pub add_special_tokens: Option<bool>,
    /// Alternatives per position (0: only the chosen token's logprob).
    pub logprobs: Option<i64>,
    /// Fill in the middle: the text after the completion; the prompt is the text before it
    /// (`text::fim`).
    pub suffix: Option<String>,
    /// Candidates generated per prompt, of which the `n` best are returned (`best_of`).
    pub best_of: Option<i64>,
    /// vLLM's: `n` beams searched (`generation::beam_search`) instead of sampling.
    #[serde(default)]
    pub use_beam_search: bool,
    /// vLLM's: beam scores divide by length to this power (beam search only; default 1).
    pub length_penalty: Option<f64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// `response_format`, `structured_outputs`, `guided_*`.
    #[serde(flatten)]
    pub structured: StructuredFields,
    /// Whatever no field above took: refused unless ignored on purpose (`request_fields`).
    /// Sorted, so the field refused first does not depend on serde_json's map order
    /// (llguidance turns on `preserve_order`).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl CompletionRequest {
    /// The 400 for the first field this server would otherwise ignore.
    pub fn refuse_unimplemented(&self) -> Result<(), ApiError> {
        refuse_unimplemented(&self.rest)
    }
}

/// OpenAI's four prompt shapes.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Ids(Vec<u32>),
    IdLists(Vec<Vec<u32>>),
}

/// One prompt, before tokenization.
#[derive(Debug, Clone)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

impl PromptInput {
    pub fn into_prompts(self) -> Vec<Prompt> {
        match self {
            PromptInput::Text(t) => vec![Prompt::Text(t)],
            PromptInput::Texts(ts) => ts.into_iter().map(Prompt::Text).collect(),
            PromptInput::Ids(ids) => vec![Prompt::Ids(ids)],
            PromptInput::IdLists(lists) => lists.into_iter().map(Prompt::Ids).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_shapes_all_parse() {
        let parse = |s: &str| {
            serde_json::from_str::<CompletionRequest>(s)
                .unwrap()
                .prompt
                .into_prompts()
        };
        assert!(matches!(
            parse(r#"{"prompt": "hi"}"#)[..],
            [Prompt::Text(_)]
        ));
        assert_eq!(parse(r#"{"prompt": ["a", "b"]}"#).len(), 2);
        assert!(
            matches!(&parse(r#"{"prompt": [1, 2]}"#)[..], [Prompt::Ids(v)] if v == &vec![1, 2])
        );
        assert_eq!(parse(r#"{"prompt": [[1], [2, 3]]}"#).len(), 2);
        assert!(serde_json::from_str::<CompletionRequest>(r#"{"prompt": [-1]}"#).is_err());
        assert!(serde_json::from_str::<CompletionRequest>(r#"{"prompt": 5}"#).is_err());
    }

    #[test]
    fn unimplemented_fields_are_refused_by_name() {
        let req: CompletionRequest =
            serde_json::from_str(r#"{"prompt": "hi", "mm_processor_kwargs": {}, "user": "u"}"#)
                .unwrap();
        let e = req.refuse_unimplemented().unwrap_err();
        assert_eq!(e.message, "`mm_processor_kwargs` is not supported yet");
        let ok: CompletionRequest =
            serde_json::from_str(r#"{"prompt": "hi", "max_tokens": 3, "echo": true, "user": "u"}"#)
                .unwrap();
        assert!(ok.refuse_unimplemented().is_ok());
    }
}
