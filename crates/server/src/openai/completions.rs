//! `/v1/completions` request, and the legacy logprobs object it answers with.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::common::SamplingFields;
use crate::detokenizer::LogprobEntry;
use crate::token_text::TokenText;

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    #[serde(default)]
    pub echo: bool,
    /// Alternatives per position (0: only the chosen token's logprob).
    pub logprobs: Option<i64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
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

/// Builds `{tokens, token_logprobs, top_logprobs, text_offset}` incrementally: streaming sends
/// one per chunk, with offsets continuing from the previous chunk.
#[derive(Debug, Default)]
pub struct LegacyLogprobs {
    tokens: Vec<Value>,
    token_logprobs: Vec<Value>,
    top_logprobs: Vec<Value>,
    text_offset: Vec<Value>,
    /// Where the next token's text starts in the choice's text.
    pub next_offset: usize,
}

impl LegacyLogprobs {
    pub fn starting_at(offset: usize) -> Self {
        Self {
            next_offset: offset,
            ..Self::default()
        }
    }

    /// `entry` is `None` for the first prompt token, which has no logprob.
    pub fn push(&mut self, token: &TokenText, entry: Option<&LogprobEntry>) {
        self.tokens.push(json!(token.text));
        self.text_offset.push(json!(self.next_offset));
        self.next_offset += token.text.len();
        match entry {
            None => {
                self.token_logprobs.push(Value::Null);
                self.top_logprobs.push(Value::Null);
            }
            Some(e) => {
                self.token_logprobs.push(json!(e.logprob));
                let top: Map<String, Value> = e
                    .top
                    .iter()
                    .map(|(t, lp)| (t.text.clone(), json!(lp)))
                    .collect();
                self.top_logprobs.push(Value::Object(top));
            }
        }
    }

    /// Moves the entries out, keeping the offset for the next chunk.
    pub fn take(&mut self) -> Value {
        json!({
            "tokens": std::mem::take(&mut self.tokens),
            "token_logprobs": std::mem::take(&mut self.token_logprobs),
            "top_logprobs": std::mem::take(&mut self.top_logprobs),
            "text_offset": std::mem::take(&mut self.text_offset),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tt(text: &str) -> TokenText {
        TokenText {
            id: 0,
            text: text.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

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
    fn legacy_logprobs_offsets_run_across_chunks_and_the_first_prompt_token_is_null() {
        let e = LogprobEntry {
            token: tt("b"),
            logprob: -0.5,
            top: vec![(tt("b"), -0.5), (tt("c"), -1.0)],
        };
        let mut lp = LegacyLogprobs::starting_at(0);
        lp.push(&tt("Hello"), None);
        lp.push(&tt(" b"), Some(&e));
        let first = lp.take();
        assert_eq!(first["tokens"], json!(["Hello", " b"]));
        assert_eq!(first["token_logprobs"], json!([null, -0.5]));
        assert_eq!(first["top_logprobs"][0], Value::Null);
        assert_eq!(first["top_logprobs"][1], json!({"b": -0.5, "c": -1.0}));
        assert_eq!(first["text_offset"], json!([0, 5]));
        lp.push(&tt("!"), Some(&e));
        assert_eq!(lp.take()["text_offset"], json!([7]));
    }
}
