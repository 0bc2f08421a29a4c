//! Function calling's wire format: the `tools` and `tool_choice` a chat request carries, and
//! the `tool_calls` of an answer, complete and streamed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One entry of `tools`. Only function tools exist in the Chat Completions API.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ToolSpec {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    pub function: FunctionSpec,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Function,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FunctionSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON schema, handed to the chat template as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `tool_choice`: a mode, or one function by name.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(ToolChoiceMode),
    Named(NamedToolChoice),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    None,
    Auto,
    Required,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedToolChoice {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    pub function: FunctionName,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FunctionName {
    pub name: String,
}

/// The deprecated `function_call` of a request (`legacy_functions`): `"none"`, `"auto"` or `{"name": ...}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FunctionCallChoice {
    Mode(LegacyMode),
    Named(FunctionName),
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LegacyMode {
    None,
    Auto,
}

/// A call in a complete answer's `message.tool_calls`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as a JSON text (OpenAI's format), exactly as the model wrote them.
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        Self {
            id,
            kind: "function",
            function: FunctionCall { name, arguments },
        }
    }
}

/// A streamed piece of a call: the first carries `id`, `type` and the name, later ones
/// argument text; a client joins the pieces of one `index`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionCallDelta,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCallDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub arguments: String,
}

impl ToolCallDelta {
    /// The call's opening piece: its id, type and name, no arguments yet.
    pub fn opening(index: usize, id: String, name: String) -> Self {
        Self {
            index,
            id: Some(id),
            kind: Some("function"),
            function: FunctionCallDelta {
                name: Some(name),
                arguments: String::new(),
            },
        }
    }

    pub fn arguments(index: usize, arguments: String) -> Self {
        Self {
            index,
            id: None,
            kind: None,
            function: FunctionCallDelta {
                name: None,
                arguments,
            },
        }
    }
}

/// A fresh `call_...` id (24 random letters and digits, as OpenAI's).
pub fn new_call_id() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    format!("call_{}", Alphanumeric.sample_string(&mut rand::rng(), 24))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tool_choice_parses_modes_and_named_functions() {
        let mode: ToolChoice = serde_json::from_value(json!("auto")).unwrap();
        assert!(matches!(mode, ToolChoice::Mode(ToolChoiceMode::Auto)));
        let named: ToolChoice =
            serde_json::from_value(json!({"type": "function", "function": {"name": "f"}})).unwrap();
        assert!(matches!(named, ToolChoice::Named(n) if n.function.name == "f"));
        assert!(serde_json::from_value::<ToolChoice>(json!("sometimes")).is_err());
    }

    #[test]
    fn calls_serialize_as_openai_writes_them() {
        let call = ToolCall::new("call_1".into(), "f".into(), "{}".into());
        assert_eq!(
            serde_json::to_value(call).unwrap(),
            json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}})
        );
        assert_eq!(
            serde_json::to_value(ToolCallDelta::arguments(1, "{\"a\"".into())).unwrap(),
            json!({"index": 1, "function": {"arguments": "{\"a\""}})
        );
        assert!(new_call_id().starts_with("call_"));
        assert_eq!(new_call_id().len(), 29);
    }
}
