//! `input` as chat messages. Items are messages (`role` and `content`), the model's earlier
//! `function_call`s and the client's `function_call_output`s, and earlier `reasoning`: what a
//! client gets in `output` it can send back as it came (`input += response.output`), so the
//! fields of output items (`id`, `status`, `annotations`) are accepted.
//!
//! Chat templates know one assistant message with `tool_calls`, so an assistant message and the
//! calls right after it become one message; a call with no message before it opens an empty
//! one. A call's output is a `tool` message; reasoning becomes the next assistant message's
//! `reasoning_content` (the name templates that show past reasoning read).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::openai::chat::{ChatMessage, MessageContent};
use crate::openai::tools::ToolCall;

/// `input`: a user message's text, or a list of items.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// A message item (`type` may be left out); `id` and `status` come with echoed output items.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageItem {
    #[serde(rename = "type")]
    #[allow(dead_code)] // "message", checked by the dispatch on `type`.
    kind: Option<String>,
    role: String,
    content: Content,
    #[allow(dead_code)]
    id: Option<String>,
    #[allow(dead_code)]
    status: Option<String>,
}

/// A message's or a call output's content: text, or a list of text parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// `input_text` (user side) or `output_text` (an echoed answer, with its `annotations`). Other
/// fields are kept to refuse them: part types other than text carry theirs (`image_url`), and
/// the refusal names the type rather than the field.
#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    #[allow(dead_code)]
    annotations: Option<Vec<Value>>,
    #[allow(dead_code)]
    logprobs: Option<Vec<Value>>,
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionCallItem {
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    call_id: String,
    name: String,
    arguments: String,
    #[allow(dead_code)]
    id: Option<String>,
    #[allow(dead_code)]
    status: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionCallOutputItem {
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    call_id: String,
    output: Content,
    #[allow(dead_code)]
    id: Option<String>,
    #[allow(dead_code)]
    status: Option<String>,
}

/// Earlier reasoning, its text in `content` (as this server writes it) or in `summary`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasoningItem {
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    summary: Vec<ContentPart>,
    content: Option<Vec<ContentPart>>,
    /// Only OpenAI can read its encrypted reasoning: refused when set.
    encrypted_content: Option<String>,
    #[allow(dead_code)]
    id: Option<String>,
    #[allow(dead_code)]
    status: Option<String>,
}

/// One chat message in the making.
#[derive(Debug, Default)]
struct Turn {
    role: String,
    content: Option<String>,
    tool_calls: Vec<ToolCall>,
    tool_call_id: Option<String>,
    reasoning: Option<String>,
}

impl Turn {
    fn into_message(self) -> Result<ChatMessage, ApiError> {
        let mut extra = Map::new();
        if !self.tool_calls.is_empty() {
            let calls = serde_json::to_value(&self.tool_calls)
                .map_err(|e| ApiError::internal(format!("cannot write tool calls: {e}")))?;
            extra.insert("tool_calls".into(), calls);
        }
        if let Some(id) = self.tool_call_id {
            extra.insert("tool_call_id".into(), Value::String(id));
        }
        if let Some(reasoning) = self.reasoning {
            extra.insert("reasoning_content".into(), Value::String(reasoning));
        }
        Ok(ChatMessage {
            role: self.role,
            content: self.content.map(MessageContent::Text),
            extra,
        })
    }
}

/// The chat messages for `instructions` (a system message first) and `input`.
pub fn chat_messages(
    instructions: Option<String>,
    input: Input,
) -> Result<Vec<ChatMessage>, ApiError> {
    let mut turns: Vec<Turn> = Vec::new();
    if let Some(text) = instructions {
        turns.push(Turn {
            role: "system".into(),
            content: Some(text),
            ..Turn::default()
        });
    }
    let items = match input {
        Input::Text(text) => {
            turns.push(Turn {
                role: "user".into(),
                content: Some(text),
                ..Turn::default()
            });
            Vec::new()
        }
        Input::Items(items) => items,
    };
    let mut reasoning: Option<String> = None;
    for (index, item) in items.into_iter().enumerate() {
        let kind = match item.get("type") {
            None | Some(Value::Null) => "message".to_string(),
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => return Err(bad_item(index, format!("`type` {other} is not a string"))),
        };
        match kind.as_str() {
            "message" => {
                let m: MessageItem = parse_item(index, item)?;
                let role = match m.role.as_str() {
                    "user" | "system" | "assistant" => m.role,
                    // Chat templates know no developer role; it is the system's voice.
                    "developer" => "system".to_string(),
                    other => return Err(bad_item(index, format!("unknown role `{other}`"))),
                };
                let reasoning = (role == "assistant").then(|| reasoning.take()).flatten();
                turns.push(Turn {
                    role,
                    content: Some(content_text(index, m.content)?),
                    reasoning,
                    ..Turn::default()
                });
            }
            "function_call" => {
                let call: FunctionCallItem = parse_item(index, item)?;
                let call = ToolCall::new(call.call_id, call.name, call.arguments);
                match turns.last_mut() {
                    Some(last) if last.role == "assistant" => last.tool_calls.push(call),
                    _ => turns.push(Turn {
                        role: "assistant".into(),
                        tool_calls: vec![call],
                        reasoning: reasoning.take(),
                        ..Turn::default()
                    }),
                }
            }
            "function_call_output" => {
                let out: FunctionCallOutputItem = parse_item(index, item)?;
                turns.push(Turn {
                    role: "tool".into(),
                    content: Some(content_text(index, out.output)?),
                    tool_call_id: Some(out.call_id),
                    ..Turn::default()
                });
            }
            "reasoning" => {
                let r: ReasoningItem = parse_item(index, item)?;
                if r.encrypted_content.is_some() {
                    return Err(bad_item(
                        index,
                        "`encrypted_content` is OpenAI's; this server cannot read it",
                    ));
                }
                let parts = r.content.unwrap_or(r.summary);
                let text = parts_text(index, parts)?;
                reasoning.get_or_insert_with(String::new).push_str(&text);
            }
            "item_reference" => {
                return Err(bad_item(
                    index,
                    "`item_reference` needs stored items; this server stores none",
                ))
            }
            other => {
                return Err(bad_item(
                    index,
                    format!("input items of type `{other}` are not supported"),
                ))
            }
        }
    }
    // Reasoning with no assistant turn after it belongs to no message: a template has nowhere
    // to put it.
    turns.into_iter().map(Turn::into_message).collect()
}

fn parse_item<T: serde::de::DeserializeOwned>(index: usize, item: Value) -> Result<T, ApiError> {
    serde_json::from_value(item).map_err(|e| bad_item(index, e.to_string()))
}

fn bad_item(index: usize, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_param("input", format!("input[{index}]: {why}"))
}

fn content_text(index: usize, content: Content) -> Result<String, ApiError> {
    match content {
        Content::Text(text) => Ok(text),
        Content::Parts(parts) => parts_text(index, parts),
    }
}

/// Text parts joined; other parts (images, files, audio, refusals) refused: this server serves
/// text models and reads text only.
fn parts_text(index: usize, parts: Vec<ContentPart>) -> Result<String, ApiError> {
    let mut text = String::new();
    for part in parts {
        match (part.kind.as_str(), part.text) {
            ("input_text" | "output_text" | "reasoning_text" | "summary_text", Some(t)) => {
                if let Some(field) = part.rest.keys().next() {
                    return Err(bad_item(
                        index,
                        format!("unknown field `{field}` in a text part"),
                    ));
                }
                text.push_str(&t)
            }
            (kind, _) => {
                return Err(bad_item(
                    index,
                    format!("content parts of type `{kind}` are not supported (text only)"),
                ))
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
