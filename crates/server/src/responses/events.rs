//! The streamed form of a response: server-sent events, each named by its `type` (the SSE
//! `event:` line says the same) and numbered by `sequence_number` from 0 in the order sent.
//! The stream opens with `response.created` and `response.in_progress`, brings each output
//! item as `output_item.added`, its parts and deltas, `output_item.done`, and ends with
//! `response.completed` (or `response.incomplete`) carrying the whole response.

use serde::Serialize;

use super::object::{ContentPart, OutputItem, ResponseObject};

/// One event as sent.
#[derive(Debug, Clone, Serialize)]
pub struct StreamEvent {
    #[serde(flatten)]
    pub body: EventBody,
    pub sequence_number: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum EventBody {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    /// The end of a response cut short by `max_output_tokens` (or the context's end).
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: ContentPart,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: ContentPart,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<NoLogprob>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<NoLogprob>,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.done")]
    ReasoningTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: String,
        output_index: usize,
        name: String,
        arguments: String,
    },
}

/// Never written: logprobs are not offered on this route; typed for `logprobs: []`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoLogprob {}

impl EventBody {
    /// The event's `type`, also its SSE `event:` name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::Completed { .. } => "response.completed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::OutputItemAdded { .. } => "response.output_item.added",
            Self::OutputItemDone { .. } => "response.output_item.done",
            Self::ContentPartAdded { .. } => "response.content_part.added",
            Self::ContentPartDone { .. } => "response.content_part.done",
            Self::OutputTextDelta { .. } => "response.output_text.delta",
            Self::OutputTextDone { .. } => "response.output_text.done",
            Self::ReasoningTextDelta { .. } => "response.reasoning_text.delta",
            Self::ReasoningTextDone { .. } => "response.reasoning_text.done",
            Self::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Self::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
        }
    }
}

/// Numbers the events in the order they are sent.
#[derive(Debug, Default)]
pub struct Sequencer {
    next: u64,
}

impl Sequencer {
    pub fn stamp(&mut self, body: EventBody) -> StreamEvent {
        let sequence_number = self.next;
        self.next += 1;
        StreamEvent {
            body,
            sequence_number,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_carry_their_name_as_type_and_a_sequence_number() {
        let mut seq = Sequencer::default();
        let first = seq.stamp(EventBody::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 0,
            content_index: 0,
            delta: "Hi".into(),
            logprobs: Vec::new(),
        });
        assert_eq!(first.body.name(), "response.output_text.delta");
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                "content_index": 0, "delta": "Hi", "logprobs": [], "sequence_number": 0})
        );
        let second = seq.stamp(EventBody::FunctionCallArgumentsDone {
            item_id: "fc_1".into(),
            output_index: 1,
            name: "f".into(),
            arguments: "{}".into(),
        });
        assert_eq!(second.sequence_number, 1);
        assert_eq!(
            serde_json::to_value(&second).unwrap()["type"],
            second.body.name()
        );
    }
}
