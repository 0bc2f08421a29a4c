//! The streamed answer's server-sent events: each goes out as `event: <type>` and
//! `data: <the event as JSON>` (the JSON carries the same `type`), in Anthropic's order:
//! `message_start`, per block `content_block_start` / `content_block_delta`s /
//! `content_block_stop`, then `message_delta` (stop reason, output tokens) and `message_stop`;
//! `ping` after `message_start` and whenever the stream has been idle for a while.

use serde::Serialize;

use super::error::ErrorInfo;
use super::response::{ContentBlock, Message, StopReason};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: Message,
    },
    ContentBlockStart {
        index: usize,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        usage: OutputUsage,
    },
    MessageStop,
    /// Keeps the connection alive; carries nothing.
    Ping,
    /// A failure after the stream began (the HTTP status is already 200).
    Error {
        error: ErrorInfo,
    },
}

impl StreamEvent {
    /// The SSE `event:` name, which is the `type` in the data.
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Ping => "ping",
            Self::Error { .. } => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum BlockDelta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    /// A piece of a tool call's input as JSON text; the pieces of a block join into its input.
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageDeltaBody {
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
}

/// `message_delta`'s usage: the output tokens so far (cumulative, as Anthropic counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputUsage {
    pub output_tokens: usize,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_carry_their_name_as_type() {
        let events = [
            StreamEvent::ContentBlockDelta {
                index: 1,
                delta: BlockDelta::InputJson {
                    partial_json: "{\"a\"".into(),
                },
            },
            StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(StopReason::EndTurn),
                    stop_sequence: None,
                },
                usage: OutputUsage { output_tokens: 4 },
            },
            StreamEvent::MessageStop,
            StreamEvent::Ping,
        ];
        for e in &events {
            assert_eq!(serde_json::to_value(e).unwrap()["type"], e.name());
        }
        assert_eq!(
            serde_json::to_value(&events[0]).unwrap(),
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\""}})
        );
        assert_eq!(
            serde_json::to_value(&events[3]).unwrap(),
            json!({"type": "ping"})
        );
        assert_eq!(
            serde_json::to_value(&events[1]).unwrap(),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                "stop_sequence": null}, "usage": {"output_tokens": 4}})
        );
    }
}
