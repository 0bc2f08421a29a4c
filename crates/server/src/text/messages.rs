//! The messages between the HTTP tasks and the detokenizer thread: a request's
//! [`Registration`] going in, its [`Delta`]s (text, tokens, logprobs, how it finished) coming
//! back. (The engine's own, `EngineCommand` and `EngineStep`, are in the engine crate.)

use std::sync::Arc;

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
    pub top: Vec<(TokenText, f32)>,
}

#[derive(Debug, Clone)]
pub struct PromptSummary {
    pub num_prompt_tokens: usize,
    pub num_cached_tokens: usize,
    /// Every prompt token, with its logprob from the second one on, when they were asked for.
    pub prompt_logprobs: Option<Vec<(TokenText, Option<LogprobEntry>)>>,
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
    /// The stop string that finished the request (with `Finish::Stop`), if one did.
    pub stop_string: Option<String>,
}

/// How the HTTP side announces a request before handing it to the engine.
pub struct Registration {
    pub prompt_ids: Arc<Vec<u32>>,
    pub stop: Vec<String>,
    pub skip_special_tokens: bool,
    pub sender: UnboundedSender<Delta>,
}
