//! The Messages API request (`/v1/messages`) and the count-tokens request, as Anthropic
//! documents them. Content blocks are read per type in [`super::translate`] (so an image block
//! is refused with a message naming it, not serde's "did not match any variant").

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::openai::request_fields::unimplemented_field;

#[derive(Debug, Deserialize)]
pub struct MessagesRequest {
    pub model: String,
    /// Required by Anthropic; `Option` so that its absence is a 400 naming it.
    pub max_tokens: Option<i64>,
    #[serde(flatten)]
    pub conversation: Conversation,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub stream: bool,
    /// Accepted and ignored on purpose, like OpenAI's `user`: an end-user id for Anthropic's
    /// abuse monitoring, no effect on the answer.
    #[serde(rename = "metadata")]
    pub _metadata: Option<IgnoredAny>,
    /// Whatever no field above took: refused by name ([`refuse_unimplemented`]).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `/v1/messages/count_tokens`: the fields that shape the prompt, no sampling.
#[derive(Debug, Deserialize)]
pub struct CountTokensRequest {
    pub model: String,
    #[serde(flatten)]
    pub conversation: Conversation,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// What the prompt is rendered from.
#[derive(Debug, Deserialize)]
pub struct Conversation {
    pub messages: Vec<InputMessage>,
    pub system: Option<SystemPrompt>,
    pub tools: Option<Vec<ToolDefinition>>,
    pub tool_choice: Option<AnthropicToolChoice>,
    pub thinking: Option<ThinkingConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputMessage {
    pub role: String,
    pub content: InputContent,
}

/// A message's content: a string, or content blocks (each read by its `type` in translate).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum InputContent {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    Text(String),
    Blocks(Vec<TextBlockParam>),
}

/// `{"type": "text", "text": ...}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextBlockParam {
    #[serde(rename = "type")]
    pub _kind: TextKind,
    pub text: String,
    /// Accepted and ignored on purpose: a prompt-caching breakpoint; ferrite's prefix cache
    /// reuses every shared prefix without being told.
    #[serde(rename = "cache_control")]
    pub _cache_control: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextKind {
    Text,
}

/// `{"type": "tool_use", "id", "name", "input"}` in an assistant message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolUseBlockParam {
    #[serde(rename = "type")]
    pub _kind: String,
    pub id: String,
    pub name: String,
    pub input: serde_json::Map<String, Value>,
    #[serde(rename = "cache_control")]
    pub _cache_control: Option<IgnoredAny>,
}

/// `{"type": "tool_result", "tool_use_id", "content", "is_error"}` in a user message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultBlockParam {
    #[serde(rename = "type")]
    pub _kind: String,
    pub tool_use_id: String,
    pub content: Option<ToolResultContent>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(rename = "cache_control")]
    pub _cache_control: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<Value>),
}

/// `{"type": "thinking", "thinking", "signature"}`: an earlier turn's reasoning, sent back.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkingBlockParam {
    #[serde(rename = "type")]
    pub _kind: String,
    pub thinking: String,
    /// Anthropic's proof that the reasoning is Claude's; meaningless here (ferrite writes "").
    #[serde(rename = "signature")]
    pub _signature: Option<IgnoredAny>,
}

/// A custom tool (`type` absent or "custom"); Anthropic's server tools are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(rename = "cache_control")]
    pub _cache_control: Option<IgnoredAny>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum AnthropicToolChoice {
    Auto {
        disable_parallel_tool_use: Option<bool>,
    },
    Any {
        disable_parallel_tool_use: Option<bool>,
    },
    Tool {
        name: String,
        disable_parallel_tool_use: Option<bool>,
    },
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ThinkingConfig {
    Enabled { budget_tokens: i64 },
    Disabled,
}

/// Anthropic fields ferrite knows but does not implement: "not supported yet" rather than
/// "unknown field", so the client knows it is not a typo.
const NOT_YET: &[&str] = &[
    "container",
    "mcp_servers",
    "context_management",
    "output_config",
    "output_format",
];

/// Accepted and ignored on purpose (no effect on what a self-hosted server generates):
/// `service_tier` (one tier here), `cache_control` (automatic prompt caching: ferrite's prefix
/// cache is always on), `inference_geo` (one place here).
const IGNORED_ON_PURPOSE: &[&str] = &["service_tier", "cache_control", "inference_geo"];

/// The 400 for the first field of `rest` this server would otherwise ignore (nulls ask for
/// nothing and pass).
pub fn refuse_unimplemented(rest: &BTreeMap<String, Value>) -> Result<(), ApiError> {
    for (name, value) in rest {
        if value.is_null() || IGNORED_ON_PURPOSE.contains(&name.as_str()) {
            continue;
        }
        if NOT_YET.contains(&name.as_str()) {
            return Err(ApiError {
                code: Some("unsupported_parameter"),
                ..ApiError::invalid_param(name, format!("`{name}` is not supported yet"))
            });
        }
        return Err(unimplemented_field(name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn known_fields_are_typed_and_the_rest_is_refused_by_name() {
        let req: MessagesRequest = serde_json::from_value(json!({"model": "m", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}], "system": "be brief",
            "metadata": {"user_id": "u"}, "service_tier": "auto", "top_k": 3,
            "tool_choice": {"type": "tool", "name": "f"}, "thinking": {"type": "disabled"},
            "temprature": 0.5}))
        .unwrap();
        assert_eq!(
            req.rest.keys().collect::<Vec<_>>(),
            ["service_tier", "temprature"]
        );
        let e = refuse_unimplemented(&req.rest).unwrap_err();
        assert_eq!(
            (e.param.as_deref(), e.message.as_str()),
            (Some("temprature"), "unknown field `temprature`")
        );
        assert_eq!(
            req.conversation.tool_choice,
            Some(AnthropicToolChoice::Tool {
                name: "f".into(),
                disable_parallel_tool_use: None
            })
        );
        assert_eq!(req.conversation.thinking, Some(ThinkingConfig::Disabled));
        let mcp = refuse_unimplemented(&BTreeMap::from([("mcp_servers".into(), json!([]))]));
        assert_eq!(
            mcp.unwrap_err().message,
            "`mcp_servers` is not supported yet"
        );
    }

    #[test]
    fn tool_choice_and_thinking_refuse_unknown_shapes() {
        let any: AnthropicToolChoice =
            serde_json::from_value(json!({"type": "any", "disable_parallel_tool_use": true}))
                .unwrap();
        assert_eq!(
            any,
            AnthropicToolChoice::Any {
                disable_parallel_tool_use: Some(true)
            }
        );
        let none: AnthropicToolChoice = serde_json::from_value(json!({"type": "none"})).unwrap();
        assert_eq!(none, AnthropicToolChoice::None);
        assert!(
            serde_json::from_value::<AnthropicToolChoice>(json!({"type": "sometimes"})).is_err()
        );
        assert!(
            serde_json::from_value::<AnthropicToolChoice>(json!({"type": "auto", "x": 1})).is_err()
        );
        let budget: ThinkingConfig =
            serde_json::from_value(json!({"type": "enabled", "budget_tokens": 2048})).unwrap();
        assert_eq!(
            budget,
            ThinkingConfig::Enabled {
                budget_tokens: 2048
            }
        );
    }

    #[test]
    fn count_tokens_takes_no_sampling_fields() {
        let req: CountTokensRequest = serde_json::from_value(json!({"model": "m",
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}))
        .unwrap();
        assert_eq!(req.rest.keys().collect::<Vec<_>>(), ["max_tokens"]);
    }
}
