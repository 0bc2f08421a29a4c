//! The `/v1/chat/completions` request and the normalisation of its messages for templates.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::sampling::SamplingFields;
use crate::error::ApiError;

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub logprobs: bool,
    pub top_logprobs: Option<i64>,
    /// vLLM's extension; true unless the client continues a partial assistant message.
    pub add_generation_prompt: Option<bool>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    /// `name`, `tool_calls`, ...: handed to the template as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

impl ChatMessage {
    /// Templates index `message['content']` as a string, so text parts are joined and other
    /// parts (images, audio) refused: this server serves text models only.
    pub fn into_template_value(self) -> Result<Value, ApiError> {
        let content = match self.content {
            None => Value::Null,
            Some(MessageContent::Text(t)) => Value::String(t),
            Some(MessageContent::Parts(parts)) => {
                let mut text = String::new();
                for p in parts {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(ApiError::invalid_param(
                                "messages",
                                format!(
                                    "content parts of type `{kind}` are not supported (text only)"
                                ),
                            ))
                        }
                    }
                }
                Value::String(text)
            }
        };
        let mut obj = self.extra;
        obj.insert("role".into(), Value::String(self.role));
        obj.insert("content".into(), content);
        Ok(Value::Object(obj))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_parts_are_joined_and_other_parts_refused() {
        let m: ChatMessage = serde_json::from_str(
            r#"{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "x"}"#,
        )
        .unwrap();
        assert_eq!(
            m.into_template_value().unwrap(),
            json!({"role": "user", "content": "ab", "name": "x"})
        );
        let img: ChatMessage =
            serde_json::from_str(r#"{"role": "user", "content": [{"type": "image_url"}]}"#)
                .unwrap();
        assert_eq!(img.into_template_value().unwrap_err().status, 400);
    }
}
