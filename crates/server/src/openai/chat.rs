//! `/v1/chat/completions` request, message normalisation, and the chat logprobs shape.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::common::SamplingFields;
use crate::detokenizer::LogprobEntry;
use crate::error::ApiError;
use crate::token_text::TokenText;

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

fn token_json(t: &TokenText, logprob: f32) -> Value {
    json!({"token": t.text, "logprob": logprob, "bytes": t.bytes})
}

/// `{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}`.
pub fn chat_logprobs(entries: &[LogprobEntry]) -> Value {
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = token_json(&e.token, e.logprob);
            v["top_logprobs"] = e.top.iter().map(|(t, lp)| token_json(t, *lp)).collect();
            v
        })
        .collect();
    json!({ "content": content })
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn chat_logprobs_have_openais_shape() {
        let t = TokenText {
            id: 1,
            text: "é".into(),
            bytes: vec![0xC3, 0xA9],
        };
        let v = chat_logprobs(&[LogprobEntry {
            token: t.clone(),
            logprob: -0.1,
            top: vec![(t, -0.1)],
        }]);
        assert_eq!(v["content"][0]["bytes"], json!([195, 169]));
        assert_eq!(v["content"][0]["top_logprobs"][0]["token"], json!("é"));
    }
}
