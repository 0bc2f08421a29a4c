//! The messages between the HTTP tasks and the detokenizer thread: a request's
//! [`Registration`] going in, its [`Delta`]s (text, tokens, logprobs, how it finished) coming
//! back. (The engine's own, `EngineCommand` and `EngineStep`, are in the engine crate.)

use std::sync::Arc;

use ferrite_engine::SpecSummary;
use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

use crate::text::token_text::TokenText;

/// How a request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    /// The engine aborted it (the client went away): nobody reads the answer.
    Aborted,
}

impl Finish {
    pub fn as_openai(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Aborted => "abort",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogprobEntry {
    pub token: TokenText,
    pub logprob: f32,
    /// vLLM's rank of `token` (1: the most likely).
    pub rank: u32,
    pub top: Vec<(TokenText, f32)>,
}

#[derive(Debug, Clone)]
pub struct PromptSummary {
    pub num_prompt_tokens: usize,
    pub num_cached_tokens: usize,
    /// Every prompt token, with its logprob from the second one on, when they were asked for.
    pub prompt_logprobs: Option<Vec<(TokenText, Option<LogprobEntry>)>>,
}

/// What ended a request that finished with [`Finish::Stop`], when the request itself named it:
/// vLLM's `stop_reason`, serialized as it does (the string, or the token id as a number).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MatchedStop {
    /// One of the request's stop strings.
    Text(String),
    /// One of the request's `stop_token_ids`.
    TokenId(u32),
}

/// What one step produced for one request, in text.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    pub text: String,
    pub token_ids: Vec<u32>,
    pub logprobs: Vec<LogprobEntry>,
    /// In the first delta of a request.
    pub prompt: Option<PromptSummary>,
    pub finish: Option<Finish>,
    /// The stop string or stop token id that finished the request (with `Finish::Stop`), if
    /// one did.
    pub stop_reason: Option<MatchedStop>,
    /// A speculated request's drafts so far, kept and not (running totals: the latest delta's
    /// are the request's).
    pub speculation: Option<SpecSummary>,
}

/// How the HTTP side announces a request before handing it to the engine.
pub struct Registration {
    pub prompt_ids: Arc<Vec<u32>>,
    pub stop: Vec<String>,
    /// The stop token ids a finish on which is reported as [`MatchedStop::TokenId`].
    pub stop_token_ids: Vec<u32>,
    pub skip_special_tokens: bool,
    /// vLLM's `spaces_between_special_tokens` (with special tokens kept).
    pub spaces_between_special_tokens: bool,
    /// vLLM's `include_stop_str_in_output`: a matched stop string ends the text.
    pub include_stop_str: bool,
    pub sender: UnboundedSender<Delta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matched_stop_serializes_as_vllm_s_stop_reason() {
        let json = |m: MatchedStop| serde_json::to_value(m).unwrap();
        assert_eq!(
            json(MatchedStop::Text("END".into())),
            serde_json::json!("END")
        );
        assert_eq!(json(MatchedStop::TokenId(7)), serde_json::json!(7));
    }
}
