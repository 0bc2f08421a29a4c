//! OpenAI's deprecated function calling: `functions` and `function_call` in the request, an
//! assistant message's `function_call` and `function`-role results in the conversation, and
//! `message.function_call` with `finish_reason: "function_call"` in the answer. Requests are
//! mapped onto tools (`functions` are function tools, `function_call` the `tool_choice`, one
//! call at most, as the legacy answer holds one); the conversation's legacy messages become
//! the `tool_calls` and `tool` messages chat templates render.

use serde_json::{json, Map, Value};

use super::chat::ChatMessage;
use super::tools::{
    FunctionCallChoice, FunctionSpec, LegacyMode, NamedToolChoice, ToolChoice, ToolChoiceMode,
    ToolKind, ToolSpec,
};
use crate::error::ApiError;

/// The request's tool fields once the legacy ones are mapped onto them.
#[derive(Debug)]
pub struct ToolFields {
    pub tools: Option<Vec<ToolSpec>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    /// The request used `functions`: calls are answered in the legacy shape.
    pub legacy: bool,
}

/// Maps `functions` / `function_call` onto tools; they cannot be mixed with `tools` /
/// `tool_choice`, and `function_call` needs `functions`.
pub fn tool_fields(
    tools: Option<Vec<ToolSpec>>,
    tool_choice: Option<ToolChoice>,
    parallel_tool_calls: Option<bool>,
    functions: Option<Vec<FunctionSpec>>,
    function_call: Option<FunctionCallChoice>,
) -> Result<ToolFields, ApiError> {
    let Some(functions) = functions else {
        if function_call.is_some() {
            return Err(ApiError::invalid_param(
                "function_call",
                "`function_call` is only allowed when `functions` are specified",
            ));
        }
        return Ok(ToolFields {
            tools,
            tool_choice,
            parallel_tool_calls,
            legacy: false,
        });
    };
    let mixed = [
        ("tools", tools.is_some()),
        ("tool_choice", tool_choice.is_some()),
        ("parallel_tool_calls", parallel_tool_calls == Some(true)),
    ];
    if let Some((name, _)) = mixed.iter().find(|(_, set)| *set) {
        return Err(ApiError::invalid_param(
            name,
            format!(
                "`{name}` cannot be combined with the legacy `functions` (use `tools` alone); \
                 a legacy answer holds one call"
            ),
        ));
    }
    let tool_choice = function_call.map(|c| match c {
        FunctionCallChoice::Mode(LegacyMode::None) => ToolChoice::Mode(ToolChoiceMode::None),
        FunctionCallChoice::Mode(LegacyMode::Auto) => ToolChoice::Mode(ToolChoiceMode::Auto),
        FunctionCallChoice::Named(name) => ToolChoice::Named(NamedToolChoice {
            kind: ToolKind::Function,
            function: name,
        }),
    });
    let tools = functions
        .into_iter()
        .map(|function| ToolSpec {
            kind: ToolKind::Function,
            function,
        })
        .collect();
    Ok(ToolFields {
        tools: Some(tools),
        tool_choice,
        parallel_tool_calls: Some(false),
        legacy: true,
    })
}

/// An assistant message's `function_call` becomes a one-call `tool_calls`, and a `function`
/// message (a call's result) a `tool` message answering the latest call of its name, as chat
/// templates know only those.
pub fn modernize_messages(messages: &mut [ChatMessage]) {
    // (call id, function name) of the legacy calls so far.
    let mut calls: Vec<(String, String)> = Vec::new();
    for message in messages.iter_mut() {
        if message.role == "assistant" {
            if let Some(call) = message.extra.remove("function_call") {
                let id = format!("call_legacy_{}", calls.len());
                let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
                calls.push((id.clone(), name.to_string()));
                let call = json!({"id": id, "type": "function", "function": call});
                message
                    .extra
                    .insert("tool_calls".into(), Value::Array(vec![call]));
            }
        } else if message.role == "function" {
            message.role = "tool".into();
            let name = message.extra.get("name").and_then(Value::as_str);
            let answered = calls
                .iter()
                .rev()
                .find(|(_, n)| Some(n.as_str()) == name)
                .or(calls.last());
            if let Some((id, _)) = answered {
                insert_if_absent(&mut message.extra, "tool_call_id", id);
            }
        }
    }
}

fn insert_if_absent(map: &mut Map<String, Value>, key: &str, value: &str) {
    map.entry(key)
        .or_insert_with(|| Value::String(value.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn functions() -> Option<Vec<FunctionSpec>> {
        serde_json::from_value(json!([{"name": "get_weather", "parameters": {"type": "object"}}]))
            .unwrap()
    }

    #[test]
    fn functions_become_tools_and_function_call_the_tool_choice() {
        let named: FunctionCallChoice =
            serde_json::from_value(json!({"name": "get_weather"})).unwrap();
        let f = tool_fields(None, None, None, functions(), Some(named)).unwrap();
        assert!(f.legacy);
        assert_eq!(f.parallel_tool_calls, Some(false));
        assert_eq!(f.tools.unwrap()[0].function.name, "get_weather");
        assert!(
            matches!(f.tool_choice, Some(ToolChoice::Named(n)) if n.function.name == "get_weather")
        );
        let none: FunctionCallChoice = serde_json::from_value(json!("none")).unwrap();
        let f = tool_fields(None, None, None, functions(), Some(none)).unwrap();
        assert!(matches!(
            f.tool_choice,
            Some(ToolChoice::Mode(ToolChoiceMode::None))
        ));
        assert!(serde_json::from_value::<FunctionCallChoice>(json!("required")).is_err());
    }

    #[test]
    fn mixing_legacy_and_tools_or_a_lone_function_call_is_a_400() {
        let tools: Vec<ToolSpec> =
            serde_json::from_value(json!([{"type": "function", "function": {"name": "f"}}]))
                .unwrap();
        let e = tool_fields(Some(tools), None, None, functions(), None).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools"));
        let e = tool_fields(None, None, Some(true), functions(), None).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("parallel_tool_calls"));
        let auto: FunctionCallChoice = serde_json::from_value(json!("auto")).unwrap();
        let e = tool_fields(None, None, None, None, Some(auto)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("function_call"));
        let plain = tool_fields(None, None, None, None, None).unwrap();
        assert!(!plain.legacy && plain.tools.is_none());
    }

    #[test]
    fn legacy_messages_become_tool_calls_and_tool_results() {
        let mut messages: Vec<ChatMessage> = serde_json::from_value(json!([
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null,
                "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"role": "function", "name": "get_weather", "content": "22C"},
        ]))
        .unwrap();
        modernize_messages(&mut messages);
        let call = &messages[1].extra["tool_calls"][0];
        assert_eq!(call["id"], "call_legacy_0");
        assert_eq!(call["function"]["name"], "get_weather");
        assert_eq!(call["function"]["arguments"], "{\"city\": \"Paris\"}");
        assert!(!messages[1].extra.contains_key("function_call"));
        assert_eq!(messages[2].role, "tool");
        assert_eq!(messages[2].extra["tool_call_id"], "call_legacy_0");
        assert_eq!(messages[2].extra["name"], "get_weather");
    }
}
