//! Streamed answers: the `data:` objects of a `stream: true` response.

use serde::Serialize;

use super::logprobs::ChatLogprobs;
use super::response::{CompletionChoice, ResponseMeta, TEXT_COMPLETION};
use super::tools::{FunctionCallDelta, ToolCallDelta};
use super::usage::Usage;
use crate::text::messages::MatchedStop;

/// A choice as it appears in a chunk; `OBJECT` is the chunks' `object`.
pub trait ChunkChoice: Serialize {
    const OBJECT: &'static str;
}

impl ChunkChoice for CompletionChoice {
    const OBJECT: &'static str = TEXT_COMPLETION;
}

impl ChunkChoice for ChatChunkChoice {
    const OBJECT: &'static str = "chat.completion.chunk";
}

/// One chunk: the answer's names and one choice's news, or (last) no choice and the usage.
#[derive(Debug, Clone, Serialize)]
pub struct StreamChunk<'a, C> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: Vec<C>,
    /// Absent unless the client asked for `stream_options.include_usage`; then `null` on every
    /// chunk but the last, which carries the counts (as OpenAI does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
    /// vLLM's `return_token_ids` in chat: the prompt, on each choice's first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
}

impl<'a, C: ChunkChoice> StreamChunk<'a, C> {
    pub fn with_choice(
        meta: &'a ResponseMeta,
        choice: C,
        include_usage: bool,
        prompt_token_ids: Option<Vec<u32>>,
    ) -> Self {
        Self {
            id: &meta.id,
            object: C::OBJECT,
            created: meta.created,
            model: &meta.model,
            choices: vec![choice],
            usage: include_usage.then_some(None),
            prompt_token_ids,
        }
    }

    /// The last chunk before `[DONE]` when the client asked for the usage.
    pub fn usage(meta: &'a ResponseMeta, usage: Usage) -> Self {
        Self {
            id: &meta.id,
            object: C::OBJECT,
            created: meta.created,
            model: &meta.model,
            choices: Vec::new(),
            usage: Some(Some(usage)),
            prompt_token_ids: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ChatChunkChoice {
    pub index: usize,
    pub delta: ChatDelta,
    /// `null` unless the request asked for `logprobs`.
    pub logprobs: Option<ChatLogprobs>,
    /// `null` until the choice finished.
    pub finish_reason: Option<&'static str>,
    /// vLLM's `stop_reason`: the stop string or stop token id that finished the choice
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<MatchedStop>,
    /// vLLM's `return_token_ids`: this chunk's generated tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

/// What a chat chunk adds to the assistant's message; `{}` for a bare finish.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChatDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Reasoning text, under both names (as in the complete message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    /// The legacy shape of a call, for requests that sent `functions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCallDelta>,
}

impl ChatDelta {
    /// A choice's first delta: the role, and empty content.
    pub fn start() -> Self {
        Self {
            role: Some("assistant"),
            content: Some(String::new()),
            ..Self::default()
        }
    }

    pub fn content(text: String) -> Self {
        Self {
            content: Some(text),
            ..Self::default()
        }
    }

    pub fn reasoning(text: String) -> Self {
        Self {
            reasoning_content: Some(text.clone()),
            reasoning: Some(text),
            ..Self::default()
        }
    }

    pub fn tool_call(delta: ToolCallDelta) -> Self {
        Self {
            tool_calls: Some(vec![delta]),
            ..Self::default()
        }
    }

    pub fn function_call(delta: FunctionCallDelta) -> Self {
        Self {
            function_call: Some(delta),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta() -> ResponseMeta {
        ResponseMeta {
            id: "chatcmpl-1".into(),
            created: 7,
            model: "m".into(),
        }
    }

    fn finish_choice() -> ChatChunkChoice {
        ChatChunkChoice {
            index: 0,
            delta: ChatDelta::default(),
            logprobs: None,
            finish_reason: Some("stop"),
            stop_reason: None,
            token_ids: None,
        }
    }

    #[test]
    fn usage_is_absent_unless_asked_for_then_null_until_the_last_chunk() {
        let meta = meta();
        let plain = serde_json::to_value(StreamChunk::with_choice(
            &meta,
            finish_choice(),
            false,
            None,
        ))
        .unwrap();
        assert_eq!(
            plain,
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7,
                "model": "m", "choices": [{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": "stop"}]})
        );
        let counted =
            serde_json::to_value(StreamChunk::with_choice(&meta, finish_choice(), true, None))
                .unwrap();
        assert_eq!(counted["usage"], serde_json::Value::Null);
        assert!(counted.as_object().unwrap().contains_key("usage"));
        let last = serde_json::to_value(StreamChunk::<ChatChunkChoice>::usage(
            &meta,
            Usage::new(3, 2, 1),
        ))
        .unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(
            last["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 1}})
        );
    }

    #[test]
    fn a_chat_choice_starts_with_the_role_and_empty_content() {
        assert_eq!(
            serde_json::to_value(ChatDelta::start()).unwrap(),
            json!({"role": "assistant", "content": ""})
        );
    }
}
