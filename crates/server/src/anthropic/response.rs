//! The Messages API's answer: a `message` with content blocks, its stop reason and usage.

use serde::Serialize;
use serde_json::Value;

use super::turn_text::TurnEnd;
use crate::text::messages::Finish;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub model: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
    pub usage: MessageUsage,
}

impl Message {
    /// The message as `message_start` announces it: no content, no stop reason yet.
    pub fn started(id: String, model: String, input_tokens: usize) -> Self {
        Self {
            id,
            kind: "message",
            role: "assistant",
            model,
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: MessageUsage {
                input_tokens,
                output_tokens: 0,
            },
        }
    }
}

/// `input_tokens` counts the whole prompt (what `count_tokens` answers); ferrite's prefix
/// cache is automatic, so Anthropic's `cache_*_input_tokens` are not reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MessageUsage {
    pub input_tokens: usize,
    pub output_tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// The model's reasoning; `signature` is Anthropic's proof of origin, empty here.
    Thinking {
        thinking: String,
        signature: String,
    },
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    StopSequence,
    ToolUse,
}

impl StopReason {
    /// `None` for an aborted turn (nobody is left to read it). A turn that called tools and
    /// ended on its own is `tool_use`; one cut by `max_tokens` is `max_tokens` either way.
    pub fn of(end: &TurnEnd, called_tools: bool) -> Option<Self> {
        match end {
            TurnEnd::StopSequence(_) => Some(Self::StopSequence),
            TurnEnd::Finished(Finish::Stop) if called_tools => Some(Self::ToolUse),
            TurnEnd::Finished(Finish::Stop) => Some(Self::EndTurn),
            TurnEnd::Finished(Finish::Length) => Some(Self::MaxTokens),
            TurnEnd::Finished(Finish::Aborted) => None,
        }
    }
}

/// `/v1/messages/count_tokens`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenCount {
    pub input_tokens: usize,
}

/// `msg_` and 24 random letters and digits.
pub fn new_message_id() -> String {
    format!("msg_{}", random_suffix())
}

/// `toolu_` and 24 random letters and digits, as Anthropic's tool-use ids.
pub fn new_tool_use_id() -> String {
    format!("toolu_{}", random_suffix())
}

fn random_suffix() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 24)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stop_reasons_follow_how_the_turn_ended() {
        let stop = TurnEnd::Finished(Finish::Stop);
        assert_eq!(StopReason::of(&stop, false), Some(StopReason::EndTurn));
        assert_eq!(StopReason::of(&stop, true), Some(StopReason::ToolUse));
        let length = TurnEnd::Finished(Finish::Length);
        assert_eq!(StopReason::of(&length, true), Some(StopReason::MaxTokens));
        let seq = TurnEnd::StopSequence("END".into());
        assert_eq!(StopReason::of(&seq, false), Some(StopReason::StopSequence));
        assert_eq!(
            StopReason::of(&TurnEnd::Finished(Finish::Aborted), false),
            None
        );
    }

    #[test]
    fn a_message_serializes_as_anthropic_writes_it() {
        let mut m = Message::started("msg_1".into(), "m".into(), 7);
        m.content = vec![
            ContentBlock::Text { text: "hi".into() },
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "f".into(),
                input: json!({"a": 1}),
            },
        ];
        m.stop_reason = Some(StopReason::ToolUse);
        m.usage.output_tokens = 3;
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "hi"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 7, "output_tokens": 3}})
        );
        assert!(new_tool_use_id().starts_with("toolu_"));
        assert_eq!(new_message_id().len(), 28);
    }
}
