//! The forcing grammar for `qwen3_coder`'s XML calls: each block is
//! `<tool_call>\n<function=NAME>\n` then the parameters, each
//! `<parameter=KEY>\nVALUE\n</parameter>\n`, then `</function>\n</tool_call>`, as the Qwen3.5
//! template writes calls back. The parameters come in the order of the schema as the template
//! shows it to the model (serde_json's maps keep keys sorted), the required ones always, the
//! others optionally. A value the parser reads as a string (the schema allows a string or names
//! no type) is free text up to the `\n</parameter>\n` that ends it, or one of its `enum`'s
//! strings; any other value is JSON matching the parameter's schema.

use serde_json::{json, Map, Value};

use super::qwen3_xml::kinds;
use crate::openai::tools::ToolSpec;
use crate::output::structured::json_layout;

const VALUE_END: &str = "\n</parameter>\n";

/// The Lark grammar; `marker` spells `<tool_call>` / `</tool_call>` (as their token when the
/// tokenizer has one). After each block the answer may end (an optional newline aside): only
/// with `parallel` may another block follow.
pub fn lark(tools: &[&ToolSpec], parallel: bool, marker: impl Fn(&str) -> String) -> String {
    let repeat = if parallel { " (\"\\n\" block)*" } else { "" };
    let mut rules = vec![
        format!("start: block{repeat} \"\\n\"?"),
        format!(
            "block: {} \"\\n\" call \"\\n\" {}",
            marker("<tool_call>"),
            marker("</tool_call>")
        ),
    ];
    let calls: Vec<String> = (0..tools.len()).map(|i| format!("call_{i}")).collect();
    rules.push(format!("call: {}", calls.join(" | ")));
    for (i, tool) in tools.iter().enumerate() {
        call_rules(i, tool, &mut rules);
    }
    rules.push(format!("any_text[lazy]: {}", text_regex()));
    rules.push("any_key: /[^\\n<>]+/".into());
    let mut lark = rules.join("\n");
    lark.push('\n');
    lark
}

/// `call_i` for one tool, and a rule for each of its parameters.
fn call_rules(i: usize, tool: &ToolSpec, rules: &mut Vec<String>) {
    let open = quoted(&format!("<function={}>\n", tool.function.name));
    let parameters = tool.function.parameters.as_ref();
    let Some(properties) = parameters
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
    else {
        // No declared parameters: any, each a string.
        rules.push(format!(
            "call_{i}: {open} (\"<parameter=\" any_key \">\\n\" any_text)* \"</function>\""
        ));
        return;
    };
    let required: Vec<&str> = parameters
        .and_then(|p| p.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let defs = shared_definitions(parameters);
    let mut sequence = vec![open];
    for (j, (key, schema)) in properties.iter().enumerate() {
        let rule = format!("param_{i}_{j}");
        let optional = if required.contains(&key.as_str()) {
            ""
        } else {
            "?"
        };
        sequence.push(format!("{rule}{optional}"));
        let value = value_rule(&format!("value_{i}_{j}"), schema, &defs, rules);
        rules.push(format!(
            "{rule}: {} {value}",
            quoted(&format!("<parameter={key}>\n"))
        ));
    }
    sequence.push(quoted("</function>"));
    rules.push(format!("call_{i}: {}", sequence.join(" ")));
}

/// The value of one parameter with its closing `\n</parameter>\n`: the name of the rule that
/// matches both.
fn value_rule(
    name: &str,
    schema: &Value,
    defs: &Map<String, Value>,
    rules: &mut Vec<String>,
) -> String {
    let kinds = kinds(Some(schema));
    if kinds.string {
        let strings: Option<Vec<&str>> = schema
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|values| values.iter().map(Value::as_str).collect());
        match strings {
            Some(choices) if !choices.is_empty() => {
                let choices: Vec<String> = choices.iter().map(|c| quoted(c)).collect();
                rules.push(format!(
                    "{name}: ({}) {}",
                    choices.join(" | "),
                    quoted(VALUE_END)
                ));
            }
            _ => return "any_text".into(),
        }
    } else {
        let mut schema = schema.clone();
        if let Value::Object(object) = &mut schema {
            // `$ref`s point at the parameters schema's root: its definitions come along.
            for (k, v) in defs {
                object.entry(k.clone()).or_insert_with(|| v.clone());
            }
            object.insert("x-guidance".into(), json_layout());
        } else {
            schema = json!({"x-guidance": json_layout()});
        }
        rules.push(format!("{name}: %json {schema} {}", quoted(VALUE_END)));
    }
    name.to_string()
}

/// The parameters schema's `$defs` / `definitions`.
fn shared_definitions(parameters: Option<&Value>) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(v) = parameters.and_then(|p| p.get(key)) {
            defs.insert(key.into(), v.clone());
        }
    }
    defs
}

/// Any text, ended by the first `\n</parameter>\n` (which it includes).
fn text_regex() -> String {
    "/(?s:.*)\\n<\\/parameter>\\n/".into()
}

/// A Lark string literal.
fn quoted(text: &str) -> String {
    Value::from(text).to_string()
}

#[cfg(test)]
pub(super) mod tests;
