//! The `response` object: what `POST /v1/responses` answers, and what the stream's lifecycle
//! events carry. Besides the answer (`status`, `output`, `usage`) it echoes the request's
//! settings the way OpenAI does, the ones the official clients read (`tools`, `tool_choice`,
//! `parallel_tool_calls` are required by openai-python's `Response`).

use serde::Serialize;

use super::tools::{FunctionTool, ResponsesToolChoice, TextConfig};

#[derive(Debug, Clone, Serialize)]
pub struct ResponseObject {
    pub id: String,
    pub object: &'static str,
    /// Unix seconds.
    pub created_at: u64,
    pub status: ResponseStatus,
    /// Always `null`: a request that fails is an HTTP error here, never a failed response.
    pub error: (),
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<usize>,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    /// The temperature and top_p the answer was sampled with (the model's defaults when the
    /// request left them out).
    pub temperature: f32,
    pub top_p: f32,
    pub text: TextConfig,
    pub tool_choice: ResponsesToolChoice,
    pub tools: Vec<FunctionTool>,
    /// Kept for `previous_response_id` and `GET /v1/responses/{id}` (`responses::store`).
    pub store: bool,
    pub background: bool,
    pub truncation: &'static str,
    /// `null` until the response is finished.
    pub usage: Option<ResponseUsage>,
}

/// What is known of a response before its answer: everything but `output`, `status`, `usage`.
#[derive(Debug, Clone)]
pub struct ResponseSettings {
    pub instructions: Option<String>,
    pub max_output_tokens: Option<usize>,
    pub parallel_tool_calls: bool,
    pub temperature: f32,
    pub top_p: f32,
    pub text: TextConfig,
    pub tool_choice: ResponsesToolChoice,
    pub tools: Vec<FunctionTool>,
}

impl ResponseObject {
    /// The response as it starts: in progress, no output yet.
    pub fn in_progress(id: String, created_at: u64, model: String, s: ResponseSettings) -> Self {
        Self {
            id,
            object: "response",
            created_at,
            status: ResponseStatus::InProgress,
            error: (),
            incomplete_details: None,
            instructions: s.instructions,
            max_output_tokens: s.max_output_tokens,
            model,
            output: Vec::new(),
            parallel_tool_calls: s.parallel_tool_calls,
            temperature: s.temperature,
            top_p: s.top_p,
            text: s.text,
            tool_choice: s.tool_choice,
            tools: s.tools,
            store: false,
            background: false,
            truncation: "disabled",
            usage: None,
        }
    }

    /// The finished response: `incomplete` when the answer ran out of tokens.
    pub fn finish(&mut self, output: Vec<OutputItem>, usage: ResponseUsage, cut_short: bool) {
        self.output = output;
        self.usage = Some(usage);
        if cut_short {
            self.status = ResponseStatus::Incomplete;
            self.incomplete_details = Some(IncompleteDetails {
                reason: "max_output_tokens",
            });
        } else {
            self.status = ResponseStatus::Completed;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    InProgress,
    Completed,
    Incomplete,
}

#[derive(Debug, Clone, Serialize)]
pub struct IncompleteDetails {
    pub reason: &'static str,
}

/// The status of one output item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Incomplete,
}

/// One entry of `output`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The `<think>` part: its text as one `reasoning_text` part (no summary is written).
    Reasoning {
        id: String,
        summary: Vec<SummaryText>,
        content: Vec<ContentPart>,
        status: ItemStatus,
    },
    Message {
        id: String,
        role: &'static str,
        status: ItemStatus,
        content: Vec<ContentPart>,
    },
    FunctionCall {
        id: String,
        call_id: String,
        name: String,
        /// The arguments' JSON text, as the model wrote it.
        arguments: String,
        status: ItemStatus,
    },
}

/// Never written (reasoning is given whole, not summarized); typed for `summary: []`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryText {
    pub text: String,
}

/// A part of a message (`output_text`) or of reasoning (`reasoning_text`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    OutputText {
        text: String,
        /// Always empty: no citations here.
        annotations: Vec<Annotation>,
    },
    ReasoningText {
        text: String,
    },
}

/// Never written (no file or web citations here); typed for `annotations: []`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Annotation {}

impl ContentPart {
    pub fn output_text(text: String) -> Self {
        Self::OutputText {
            text,
            annotations: Vec::new(),
        }
    }
}

impl OutputItem {
    pub fn id(&self) -> &str {
        match self {
            Self::Reasoning { id, .. }
            | Self::Message { id, .. }
            | Self::FunctionCall { id, .. } => id,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResponseUsage {
    pub input_tokens: usize,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: usize,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InputTokensDetails {
    /// Prompt tokens whose KV came from the prefix cache.
    pub cached_tokens: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputTokensDetails {
    /// The tokens generated before the answer's first text or call came out, when the model
    /// reasoned (`crate::responses::builder`).
    pub reasoning_tokens: usize,
}

impl ResponseUsage {
    pub fn new(usage: crate::openai::usage::Usage, reasoning_tokens: usize) -> Self {
        Self {
            input_tokens: usage.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: usage.prompt_tokens_details.cached_tokens,
            },
            output_tokens: usage.completion_tokens,
            output_tokens_details: OutputTokensDetails { reasoning_tokens },
            total_tokens: usage.total_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn items_serialize_as_openai_writes_them() {
        let message = OutputItem::Message {
            id: "msg_1".into(),
            role: "assistant",
            status: ItemStatus::Completed,
            content: vec![ContentPart::output_text("hi".into())],
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}]})
        );
        let call = OutputItem::FunctionCall {
            id: "fc_1".into(),
            call_id: "call_1".into(),
            name: "f".into(),
            arguments: "{}".into(),
            status: ItemStatus::Completed,
        };
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                "arguments": "{}", "status": "completed"})
        );
    }

    #[test]
    fn a_finished_response_says_why_it_is_incomplete() {
        let settings = ResponseSettings {
            instructions: None,
            max_output_tokens: Some(3),
            parallel_tool_calls: true,
            temperature: 0.0,
            top_p: 1.0,
            text: TextConfig::default(),
            tool_choice: ResponsesToolChoice::default(),
            tools: Vec::new(),
        };
        let mut r = ResponseObject::in_progress("resp_1".into(), 7, "m".into(), settings);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            (&v["status"], &v["usage"], &v["error"]),
            (&json!("in_progress"), &Value::Null, &Value::Null)
        );
        assert_eq!(v["tool_choice"], "auto");
        assert_eq!(v["text"], json!({"format": {"type": "text"}}));
        let usage = crate::openai::usage::Usage::new(10, 3, 4);
        r.finish(Vec::new(), ResponseUsage::new(usage, 2), true);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "incomplete");
        assert_eq!(
            v["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(
            v["usage"],
            json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 2},
                "total_tokens": 13})
        );
    }

    use serde_json::Value;
}
