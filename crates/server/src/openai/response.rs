//! The complete (non-streamed) answers: `chat.completion` and `text_completion`.

use serde::Serialize;

use super::logprobs::{ChatLogprobs, CompletionLogprobs};
use super::prompt_logprobs::PromptLogprobs;
use super::tools::{FunctionCall, ToolCall};
use super::usage::Usage;
use crate::text::messages::MatchedStop;

/// What names one answer, in its complete form and in every chunk of its stream.
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
}

impl ResponseMeta {
    /// An answer created now.
    pub fn new(id: String, model: String) -> Self {
        Self {
            id,
            created: unix_now(),
            model,
        }
    }
}

/// Seconds since the Unix epoch, for the `created` fields.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `POST /v1/chat/completions` without `stream`.
#[derive(Debug, Clone, Serialize)]
pub struct ChatCompletion {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
    /// vLLM's `return_token_ids`: the prompt as the model saw it (chat template applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
    /// vLLM's `prompt_logprobs`: of the prompt all choices share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
}

impl ChatCompletion {
    pub fn new(
        meta: ResponseMeta,
        choices: Vec<ChatChoice>,
        usage: Usage,
        prompt_token_ids: Option<Vec<u32>>,
    ) -> Self {
        Self {
            id: meta.id,
            object: "chat.completion",
            created: meta.created,
            model: meta.model,
            choices,
            usage,
            prompt_token_ids,
            prompt_logprobs: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ChatChoice {
    pub index: usize,
    pub message: AssistantMessage,
    /// `null` unless the request asked for `logprobs`.
    pub logprobs: Option<ChatLogprobs>,
    /// `null` only for a choice that has not finished (never in a complete answer).
    pub finish_reason: Option<&'static str>,
    /// vLLM's `stop_reason`: the stop string or stop token id that finished the choice
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<MatchedStop>,
    /// vLLM's `return_token_ids`: the generated tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    /// `null` when the answer is only tool calls (or only reasoning).
    pub content: Option<String>,
    /// The `<think>` part, under both names clients read: `reasoning_content` (DeepSeek's and
    /// vLLM's first) and `reasoning` (vLLM's newer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The legacy shape of a call, for requests that sent `functions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
}

impl AssistantMessage {
    pub fn new(content: String) -> Self {
        Self {
            role: "assistant",
            content: Some(content),
            reasoning_content: None,
            reasoning: None,
            tool_calls: Vec::new(),
            function_call: None,
        }
    }

    pub fn with_parts(
        content: Option<String>,
        reasoning: Option<String>,
        tool_calls: Vec<ToolCall>,
    ) -> Self {
        Self {
            role: "assistant",
            content,
            reasoning_content: reasoning.clone(),
            reasoning,
            tool_calls,
            function_call: None,
        }
    }

    /// The legacy answer to `functions`: the (one) call as `function_call`.
    pub fn into_legacy(mut self) -> Self {
        if !self.tool_calls.is_empty() {
            self.function_call = Some(self.tool_calls.remove(0).function);
            self.tool_calls.clear();
        }
        self
    }
}

/// `POST /v1/completions` without `stream`.
#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    pub usage: Usage,
}

/// What [`Completion::object`] and every completion chunk's `object` say.
pub const TEXT_COMPLETION: &str = "text_completion";

impl Completion {
    pub fn new(meta: ResponseMeta, choices: Vec<CompletionChoice>, usage: Usage) -> Self {
        Self {
            id: meta.id,
            object: TEXT_COMPLETION,
            created: meta.created,
            model: meta.model,
            choices,
            usage,
        }
    }
}

/// A completion choice; a streamed chunk carries the same object with that chunk's part.
#[derive(Debug, Clone, Serialize)]
pub struct CompletionChoice {
    pub index: usize,
    /// With `echo`, the prompt's text comes first (in the first chunk when streamed).
    pub text: String,
    /// `null` unless the request asked for `logprobs`.
    pub logprobs: Option<CompletionLogprobs>,
    /// `null` until the choice finished.
    pub finish_reason: Option<&'static str>,
    /// vLLM's `stop_reason`: the stop string or stop token id that finished the choice
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<MatchedStop>,
    /// vLLM's `return_token_ids`: the choice's prompt (in the first chunk when streamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
    /// vLLM's `return_token_ids`: the generated tokens (of this chunk when streamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
    /// vLLM's `prompt_logprobs` (complete answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
}
