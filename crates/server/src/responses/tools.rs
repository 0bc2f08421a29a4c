//! What the Responses API offers the model and asks of its answer: function tools (flat, not
//! nested under `function` as in chat), `tool_choice`, and `text.format`. Each is echoed in the
//! response object as the request gave it, so the types serialize too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::openai::structured::{GrammarRequest, RequestedGrammar};
use crate::openai::tools::{
    FunctionName, FunctionSpec, NamedToolChoice, ToolChoice, ToolChoiceMode, ToolKind, ToolSpec,
};

/// One entry of `tools`. Only function tools run here (the built-in tools are OpenAI's
/// services); the type is read first so any other one is refused by name.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FunctionTool {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
    /// Fields this server does not act on (`defer_loading`, ...): refused.
    #[serde(flatten, skip_serializing)]
    pub rest: BTreeMap<String, Value>,
}

impl FunctionTool {
    /// The chat path's tool: the same function, nested.
    pub fn to_spec(&self) -> Result<ToolSpec, ApiError> {
        if self.kind != "function" {
            return Err(ApiError::invalid_param(
                "tools",
                format!(
                    "tools of type `{}` are not supported (function tools only)",
                    self.kind
                ),
            ));
        }
        if let Some((field, _)) = self.rest.iter().find(|(_, v)| !v.is_null()) {
            return Err(ApiError::invalid_param(
                "tools",
                format!("unknown field `{field}` in a function tool"),
            ));
        }
        let name = self
            .name
            .clone()
            .ok_or_else(|| ApiError::invalid_param("tools", "a function tool needs a `name`"))?;
        Ok(ToolSpec {
            kind: ToolKind::Function,
            function: FunctionSpec {
                name,
                description: self.description.clone(),
                parameters: self.parameters.clone(),
                strict: self.strict,
            },
        })
    }
}

/// `tool_choice`: a mode, or `{"type": "function", "name": ...}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ResponsesToolChoice {
    Mode(ChoiceMode),
    Typed(TypedChoice),
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChoiceMode {
    None,
    Auto,
    Required,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TypedChoice {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Default for ResponsesToolChoice {
    fn default() -> Self {
        Self::Mode(ChoiceMode::Auto)
    }
}

impl ResponsesToolChoice {
    /// The chat path's `tool_choice`.
    pub fn to_chat(&self) -> Result<ToolChoice, ApiError> {
        Ok(match self {
            Self::Mode(ChoiceMode::None) => ToolChoice::Mode(ToolChoiceMode::None),
            Self::Mode(ChoiceMode::Auto) => ToolChoice::Mode(ToolChoiceMode::Auto),
            Self::Mode(ChoiceMode::Required) => ToolChoice::Mode(ToolChoiceMode::Required),
            Self::Typed(TypedChoice {
                kind,
                name: Some(name),
            }) if kind == "function" => ToolChoice::Named(NamedToolChoice {
                kind: ToolKind::Function,
                function: FunctionName { name: name.clone() },
            }),
            Self::Typed(TypedChoice { kind, .. }) if kind == "function" => {
                return Err(ApiError::invalid_param(
                    "tool_choice",
                    "a function `tool_choice` needs a `name`",
                ))
            }
            Self::Typed(TypedChoice { kind, .. }) => {
                return Err(ApiError::invalid_param(
                    "tool_choice",
                    format!(
                        "`tool_choice` of type `{kind}` is not supported (function tools only)"
                    ),
                ))
            }
        })
    }
}

/// `text`: the answer's format, and `verbosity` for templates that read it
/// (`generation::verbosity`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TextConfig {
    #[serde(default)]
    pub format: TextFormat,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TextFormat {
    #[default]
    Text,
    JsonObject,
    JsonSchema {
        /// OpenAI requires it; it names the schema, nothing more.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        schema: Value,
        /// Every answer matches the schema whether or not the client asks for strictness.
        #[serde(skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

impl TextConfig {
    /// The output constraint `text.format` asks for.
    pub fn grammar(&self) -> Result<Option<RequestedGrammar>, ApiError> {
        let grammar = match &self.format {
            TextFormat::Text => return Ok(None),
            TextFormat::JsonObject => any_object(),
            TextFormat::JsonSchema { schema, .. } => match schema {
                Value::Object(_) | Value::Bool(_) => GrammarRequest::JsonSchema(schema.clone()),
                _ => {
                    return Err(ApiError::invalid_param(
                        "text.format.schema",
                        "a JSON schema must be an object",
                    ))
                }
            },
        };
        Ok(Some(RequestedGrammar {
            grammar,
            param: "text.format",
        }))
    }
}

/// `{"type": "object"}`: any JSON object, for `json_object`.
fn any_object() -> GrammarRequest {
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    GrammarRequest::JsonSchema(Value::Object(schema))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn function_tools_become_chat_tools_and_others_are_refused_by_type() {
        let tool: FunctionTool = serde_json::from_value(json!({"type": "function",
            "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}))
        .unwrap();
        let spec = tool.to_spec().unwrap();
        assert_eq!(
            serde_json::to_value(spec).unwrap(),
            json!({"type": "function", "function": {"name": "f", "description": "d",
                "parameters": {"type": "object"}, "strict": true}})
        );
        let search: FunctionTool = serde_json::from_value(json!({"type": "web_search"})).unwrap();
        let e = search.to_spec().unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools"));
        assert!(e.message.contains("`web_search`"), "{}", e.message);
        let extra: FunctionTool =
            serde_json::from_value(json!({"type": "function", "name": "f", "defer_loading": true}))
                .unwrap();
        assert!(extra
            .to_spec()
            .unwrap_err()
            .message
            .contains("defer_loading"));
    }

    #[test]
    fn tool_choice_maps_to_chat_and_echoes_as_given() {
        for (given, chat_named) in [
            (json!("auto"), None),
            (json!("required"), None),
            (json!({"type": "function", "name": "f"}), Some("f")),
        ] {
            let choice: ResponsesToolChoice = serde_json::from_value(given.clone()).unwrap();
            assert_eq!(serde_json::to_value(&choice).unwrap(), given);
            match (choice.to_chat().unwrap(), chat_named) {
                (ToolChoice::Named(n), Some(name)) => assert_eq!(n.function.name, name),
                (ToolChoice::Mode(_), None) => {}
                (other, _) => panic!("{given}: {other:?}"),
            }
        }
        let other: ResponsesToolChoice =
            serde_json::from_value(json!({"type": "file_search"})).unwrap();
        assert_eq!(
            other.to_chat().unwrap_err().param.as_deref(),
            Some("tool_choice")
        );
    }

    #[test]
    fn text_format_becomes_a_json_schema_grammar() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        for (text, want) in [
            (json!({"format": {"type": "text"}}), None),
            (
                json!({"format": {"type": "json_object"}}),
                Some(json!({"type": "object"})),
            ),
            (
                json!({"format": {"type": "json_schema", "name": "x", "schema": schema.clone(),
                    "strict": true}}),
                Some(schema.clone()),
            ),
        ] {
            let config: TextConfig = serde_json::from_value(text.clone()).unwrap();
            let got = config.grammar().unwrap();
            assert_eq!(
                got.map(|g| g.grammar),
                want.map(GrammarRequest::JsonSchema),
                "{text}"
            );
            // Echoed as given.
            assert_eq!(serde_json::to_value(&config).unwrap(), text);
        }
        // `verbosity` is the template's (`generation::verbosity`), not the grammar's.
        let verbose: TextConfig = serde_json::from_value(json!({"verbosity": "low"})).unwrap();
        assert!(verbose.grammar().unwrap().is_none());
        assert!(serde_json::from_value::<TextConfig>(json!({"format": {"type": "xml"}})).is_err());
    }
}
