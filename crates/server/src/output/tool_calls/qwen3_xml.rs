//! Qwen3-Coder, Qwen3.5 and Qwen3.6 (vLLM's `qwen3_coder`): each call an XML-like block,
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! as many blocks as calls, anywhere in the answer. A parameter's value is raw text (a string
//! without quotes, the newline after `<parameter=...>` and the one before `</parameter>` being
//! layout); the tool's JSON schema says what it is: a parameter the schema types as anything
//! but a string becomes the JSON value its text spells (`42`, `true`, `{"a": 1}`), one typed
//! as a string, or not in the schema, stays a string. The arguments come out as a JSON object's
//! text, keys in the order the model wrote them.

use serde_json::Value;

use super::{Markers, ParsedToolCall};

pub const MARKERS: Markers = Markers {
    starts: &[("<tool_call>", false)],
    only_at_start: false,
    end: Some("</tool_call>"),
    bare_call_answer: false,
};

const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";

/// The call in one `<tool_call>` block's body; `None` when it is not a whole, well-formed
/// `<function=...>...</function>` (the block is then plain text). `schemas`: each offered
/// tool's name and parameters schema.
pub fn parse_body(body: &str, schemas: &[(String, Value)]) -> Option<Vec<ParsedToolCall>> {
    let rest = body.trim().strip_prefix(FUNCTION)?;
    let (name, rest) = rest.split_once('>')?;
    if !is_name(name) {
        return None;
    }
    let mut params = rest.strip_suffix(FUNCTION_END)?;
    let properties = schemas
        .iter()
        .find(|(tool, _)| tool == name)
        .and_then(|(_, schema)| schema.get("properties"))
        .and_then(Value::as_object);
    let mut arguments: Vec<(String, String)> = Vec::new();
    loop {
        params = params.trim_start();
        if params.is_empty() {
            break;
        }
        let (key, after) = params.strip_prefix(PARAMETER)?.split_once('>')?;
        if !is_name(key) {
            return None;
        }
        let (value, next) = split_value(after);
        let value = value.strip_prefix('\n').unwrap_or(value);
        let value = value.strip_suffix('\n').unwrap_or(value);
        let json = convert(value, properties.and_then(|p| p.get(key)));
        match arguments.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = json,
            None => arguments.push((key.to_string(), json)),
        }
        params = next;
    }
    let pairs: Vec<String> = arguments
        .iter()
        .map(|(k, v)| format!("{}: {v}", Value::from(k.as_str())))
        .collect();
    Some(vec![ParsedToolCall {
        name: name.to_string(),
        arguments: format!("{{{}}}", pairs.join(", ")),
    }])
}

/// A function or parameter name: no markup, no whitespace, not empty (a template placeholder
/// such as `{{ name }}` is not a call).
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || "<>{}\"'".contains(c))
}

/// A parameter's value and the text after it. The value ends at the first `</parameter>`
/// followed (whitespace aside) by the next parameter or by the end of the function; a
/// `<parameter=...>` at a line's start and its `</parameter>` inside the value are text of
/// the value (a model writing about this very format). Without such a close (a model that
/// left it out), the value ends at the next line that opens a parameter, or at the end.
fn split_value(text: &str) -> (&str, &str) {
    let line_open = format!("\n{PARAMETER}");
    let (mut from, mut depth) = (0, 0usize);
    while let Some(close) = text[from..].find(PARAMETER_END).map(|i| i + from) {
        if let Some(open) = text[from..close].find(&line_open) {
            depth += 1;
            from += open + line_open.len();
            continue;
        }
        from = close + PARAMETER_END.len();
        if depth > 0 {
            depth -= 1;
            continue;
        }
        let after = &text[from..];
        let next = after.trim_start();
        if next.is_empty() || next.starts_with(PARAMETER) {
            return (&text[..close], after);
        }
    }
    match text.find(&line_open) {
        Some(at) => (&text[..at], &text[at..]),
        None => (text, ""),
    }
}

/// What a parameter's schema lets its value be.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kinds {
    /// The raw text is the value: the schema allows a string, or says nothing of a type.
    pub string: bool,
    pub null: bool,
    pub boolean: bool,
}

/// The JSON types a parameter's schema names (`type`, a list of types, `anyOf`/`oneOf`
/// branches, an `enum`'s values); `None` when it is not in the schema.
pub(crate) fn kinds(schema: Option<&Value>) -> Kinds {
    let Some(schema) = schema else {
        return Kinds {
            string: true,
            ..Kinds::default()
        };
    };
    let mut types = Vec::new();
    collect_types(schema, &mut types, 0);
    if types.is_empty() {
        // No type at all (`{}`, an enum of strings, a `$ref`): the text as it stands.
        return Kinds {
            string: true,
            ..Kinds::default()
        };
    }
    let has = |t: &str| types.iter().any(|x| x == t);
    Kinds {
        string: has("string"),
        null: has("null"),
        boolean: has("boolean"),
    }
}

fn collect_types(schema: &Value, types: &mut Vec<String>, depth: usize) {
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t.to_ascii_lowercase()),
        Some(Value::Array(list)) => types.extend(
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_ascii_lowercase),
        ),
        _ => {}
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        for v in values {
            let t = match v {
                Value::String(_) => "string",
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                _ => "number",
            };
            types.push(t.into());
        }
    }
    if depth < 4 {
        for key in ["anyOf", "oneOf", "allOf"] {
            for branch in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_types(branch, types, depth + 1);
            }
        }
    }
}

/// One parameter's raw text as the JSON value its schema asks for (a JSON text).
fn convert(raw: &str, schema: Option<&Value>) -> String {
    let kinds = kinds(schema);
    let word = raw.trim();
    let is_null = word.eq_ignore_ascii_case("null") || word == "None";
    if kinds.null && is_null {
        return "null".into();
    }
    if kinds.string {
        return Value::from(raw).to_string();
    }
    if is_null {
        return "null".into();
    }
    // Python's spelling, as some of these models' templates render booleans.
    if kinds.boolean && (word == "True" || word == "False") {
        return word.to_ascii_lowercase();
    }
    match serde_json::from_str::<Value>(word) {
        Ok(_) => word.to_string(),
        Err(_) => Value::from(raw).to_string(),
    }
}

#[cfg(test)]
mod tests;
