//! The two `logprobs` shapes: chat's list of token objects, and completions' four parallel
//! lists (OpenAI's legacy format).
//!
//! Log probabilities are computed as `f32` and sent as `f64` (`-0.10000000149011612` rather than
//! `-0.1`), the digits the server always sent and the ones vLLM sends; non-finite values are
//! `null`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::text::messages::LogprobEntry;
use crate::text::token_text::TokenText;

/// OpenAI's limit for `top_logprobs` (and the most alternatives the engine is asked for, for
/// `prompt_logprobs` too).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Chat's `logprobs`: `{"content": [{token, logprob, bytes, top_logprobs: [...]}]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatLogprobs {
    pub content: Vec<ChatTokenLogprob>,
}

/// One sampled token and the most likely alternatives at its position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatTokenLogprob {
    pub token: String,
    pub logprob: f64,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f64,
    pub bytes: Vec<u8>,
}

impl TopLogprob {
    fn new(t: &TokenText, logprob: f32) -> Self {
        Self {
            token: t.text.clone(),
            logprob: logprob.into(),
            bytes: t.bytes.clone(),
        }
    }
}

impl ChatLogprobs {
    pub fn new(entries: &[LogprobEntry]) -> Self {
        let content = entries
            .iter()
            .map(|e| ChatTokenLogprob {
                token: e.token.text.clone(),
                logprob: e.logprob.into(),
                bytes: e.token.bytes.clone(),
                top_logprobs: e
                    .top
                    .iter()
                    .map(|(t, lp)| TopLogprob::new(t, *lp))
                    .collect(),
            })
            .collect();
        Self { content }
    }
}

/// Completions' `logprobs`: `{tokens, token_logprobs, top_logprobs, text_offset}`, one entry
/// per token in each list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    /// `null` for the first prompt token, which has no logprob.
    pub token_logprobs: Vec<Option<f64>>,
    /// Alternatives by their text (equal texts collapse into one key, the last one kept);
    /// `null` for the first prompt token.
    pub top_logprobs: Vec<Option<BTreeMap<String, f64>>>,
    /// Where each token's text starts in the choice's text.
    pub text_offset: Vec<usize>,
}

/// Builds [`CompletionLogprobs`] incrementally: streaming sends one per chunk, with offsets
/// continuing from the previous chunk.
#[derive(Debug, Default)]
pub struct LegacyLogprobs {
    pending: CompletionLogprobs,
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
        let p = &mut self.pending;
        p.tokens.push(token.text.clone());
        p.text_offset.push(self.next_offset);
        self.next_offset += token.text.len();
        p.token_logprobs.push(entry.map(|e| e.logprob.into()));
        p.top_logprobs.push(entry.map(|e| {
            e.top
                .iter()
                .map(|(t, lp)| (t.text.clone(), f64::from(*lp)))
                .collect()
        }));
    }

    /// Moves the entries out, keeping the offset for the next chunk.
    pub fn take(&mut self) -> CompletionLogprobs {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn tt(text: &str) -> TokenText {
        TokenText {
            id: 0,
            text: text.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn chat_logprobs_have_openais_shape() {
        let t = TokenText {
            id: 1,
            text: "é".into(),
            bytes: vec![0xC3, 0xA9],
        };
        let v = serde_json::to_value(ChatLogprobs::new(&[LogprobEntry {
            token: t.clone(),
            logprob: -0.1,
            rank: 1,
            top: vec![(t, -0.1)],
        }]))
        .unwrap();
        assert_eq!(v["content"][0]["bytes"], json!([195, 169]));
        assert_eq!(v["content"][0]["top_logprobs"][0]["token"], json!("é"));
    }

    #[test]
    fn legacy_logprobs_offsets_run_across_chunks_and_the_first_prompt_token_is_null() {
        let e = LogprobEntry {
            token: tt("b"),
            logprob: -0.5,
            rank: 1,
            top: vec![(tt("b"), -0.5), (tt("c"), -1.0)],
        };
        let mut lp = LegacyLogprobs::starting_at(0);
        lp.push(&tt("Hello"), None);
        lp.push(&tt(" b"), Some(&e));
        let first = serde_json::to_value(lp.take()).unwrap();
        assert_eq!(first["tokens"], json!(["Hello", " b"]));
        assert_eq!(first["token_logprobs"], json!([null, -0.5]));
        assert_eq!(first["top_logprobs"][0], Value::Null);
        assert_eq!(first["top_logprobs"][1], json!({"b": -0.5, "c": -1.0}));
        assert_eq!(first["text_offset"], json!([0, 5]));
        lp.push(&tt("!"), Some(&e));
        assert_eq!(
            serde_json::to_value(lp.take()).unwrap()["text_offset"],
            json!([7])
        );
    }
}
