//! The grammar that makes a model call a tool (`tool_choice` "required" or a named function):
//! the answer is one call block (or several, when parallel calls are allowed) in the model's
//! own format, each call object naming an offered tool and carrying arguments that match its
//! parameter schema. The parser that reads ordinary answers reads these too.

use serde_json::{json, Value};

use super::ToolCallFormat;
use crate::openai::structured::GrammarRequest;
use crate::openai::tools::ToolSpec;
use crate::output::harmony_grammar::{
    harmony_lark, parameters, HarmonyAnswer, MAX_ANALYSIS_TOKENS,
};
use crate::output::structured::json_layout;

/// The forcing grammar (llguidance's Lark syntax) for `tools`. `token_id` gives the id of a
/// marker that the tokenizer has as one token (`<tool_call>`, `[TOOL_CALLS]`): the grammar then
/// asks for that token, as the model writes it, rather than for its spelling in pieces.
pub fn forced_call_grammar(
    format: ToolCallFormat,
    tools: &[&ToolSpec],
    parallel: bool,
    token_id: impl Fn(&str) -> Option<u32>,
) -> GrammarRequest {
    let marker = |text: &str| match token_id(text) {
        Some(id) => format!("<[{id}]>"),
        None => json!(text).to_string(),
    };
    let lark = match format {
        ToolCallFormat::Hermes => {
            let call = call_schema(tools, "arguments");
            let block = format!(
                "{} \"\\n\" call \"\\n\" {}",
                marker("<tool_call>"),
                marker("</tool_call>")
            );
            // The newline models write after `</tool_call>` must not commit them to another
            // call: after it the answer may still end (Qwen2.5 writes `</tool_call>\n` then
            // its end token). Ending is allowed after every complete block.
            let repeat = if parallel { "(\"\\n\" block)* " } else { "" };
            format!("start: block {repeat}\"\\n\"?\nblock: {block}\ncall: %json {call}\n")
        }
        ToolCallFormat::Llama3Json => {
            let call = call_schema(tools, "parameters");
            let repeat = if parallel { "(\"; \" call)*" } else { "" };
            format!("start: call {repeat}\ncall: %json {call}\n")
        }
        ToolCallFormat::Mistral => {
            let call = call_schema(tools, "arguments");
            let mut list = json!({"type": "array", "items": call, "minItems": 1});
            if !parallel {
                list["maxItems"] = json!(1);
            }
            list["x-guidance"] = json_layout();
            format!(
                "start: {} calls\ncalls: %json {list}\n",
                marker("[TOOL_CALLS]")
            )
        }
        ToolCallFormat::Qwen3Coder => super::forced_xml::lark(tools, parallel, marker),
        // One call: `<|call|>` ends the model's turn (it is one of gpt-oss's stop tokens).
        ToolCallFormat::Openai => {
            harmony_lark(&HarmonyAnswer::Call(tools), MAX_ANALYSIS_TOKENS, &token_id)
        }
    };
    GrammarRequest::Lark(lark)
}

/// One call object: `{"name": <an offered tool>, "<arguments_key>": <its parameters>}`.
fn call_schema(tools: &[&ToolSpec], arguments_key: &str) -> Value {
    let one = |t: &ToolSpec| {
        json!({
            "type": "object",
            "properties": {"name": {"const": t.function.name}, arguments_key: parameters(t)},
            "required": ["name", arguments_key],
            "additionalProperties": false,
        })
    };
    let mut schema = match tools {
        [single] => one(single),
        many => json!({"anyOf": many.iter().map(|t| one(t)).collect::<Vec<_>>()}),
    };
    schema["x-guidance"] = json_layout();
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, parameters: Value) -> ToolSpec {
        serde_json::from_value(json!({
            "type": "function",
            "function": {"name": name, "parameters": parameters}
        }))
        .unwrap()
    }

    fn lark(g: GrammarRequest) -> String {
        match g {
            GrammarRequest::Lark(l) => l,
            other => panic!("not a Lark grammar: {other:?}"),
        }
    }

    #[test]
    fn hermes_uses_the_marker_tokens_and_repeats_only_when_parallel() {
        let weather = spec("get_weather", json!({"type": "object"}));
        let ids = |m: &str| match m {
            "<tool_call>" => Some(7),
            "</tool_call>" => Some(8),
            _ => None,
        };
        let one = lark(forced_call_grammar(
            ToolCallFormat::Hermes,
            &[&weather],
            false,
            ids,
        ));
        assert!(
            one.contains("block: <[7]> \"\\n\" call \"\\n\" <[8]>"),
            "{one}"
        );
        assert!(one.starts_with("start: block \"\\n\"?\n"), "{one}");
        let many = lark(forced_call_grammar(
            ToolCallFormat::Hermes,
            &[&weather],
            true,
            ids,
        ));
        assert!(
            many.starts_with("start: block (\"\\n\" block)* \"\\n\"?\n"),
            "{many}"
        );
        // Without marker tokens the markers are spelled out.
        let spelled = lark(forced_call_grammar(
            ToolCallFormat::Hermes,
            &[&weather],
            false,
            |_| None,
        ));
        assert!(spelled.contains("\"<tool_call>\""), "{spelled}");
    }

    #[test]
    fn a_hermes_answer_may_end_after_any_call_and_the_newline_after_it() {
        use crate::output::tool_calls::forced_xml::tests::{accepts, compile_format};
        let weather = spec(
            "get_weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        );
        let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let many = compile_format(ToolCallFormat::Hermes, &[&weather], true);
        // Qwen2.5 writes a newline after `</tool_call>`, then its end token.
        for text in [
            call.to_string(),
            format!("{call}\n"),
            format!("{call}\n{call}\n"),
        ] {
            assert!(accepts(&many, &text), "{text}");
        }
        assert!(!accepts(&many, &format!("{call}\n\n")));
        let one = compile_format(ToolCallFormat::Hermes, &[&weather], false);
        assert!(accepts(&one, &format!("{call}\n")));
        assert!(!accepts(&one, &format!("{call}\n{call}")));
    }

    #[test]
    fn the_call_names_an_offered_tool_with_its_parameters() {
        let a = spec(
            "a",
            json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        );
        let b = spec("b", json!(null));
        let schema = call_schema(&[&a, &b], "parameters");
        let options = schema["anyOf"].as_array().unwrap();
        assert_eq!(options[0]["properties"]["name"]["const"], "a");
        assert_eq!(
            options[0]["properties"]["parameters"]["properties"]["x"]["type"],
            "integer"
        );
        assert_eq!(
            options[1]["properties"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(options[1]["required"], json!(["name", "parameters"]));
    }

    #[test]
    fn mistral_is_a_list_after_its_marker() {
        let a = spec("a", json!({"type": "object"}));
        let g = lark(forced_call_grammar(
            ToolCallFormat::Mistral,
            &[&a],
            false,
            |m| (m == "[TOOL_CALLS]").then_some(5),
        ));
        assert!(g.starts_with("start: <[5]> calls\n"), "{g}");
        assert!(g.contains("\"maxItems\":1"), "{g}");
    }

    #[test]
    fn a_harmony_call_is_a_commentary_message_to_the_function() {
        let a = spec("a", json!({"type": "object"}));
        let b = spec("b", json!(null));
        let ids = |m: &str| match m {
            "<|channel|>" => Some(200005),
            "<|constrain|>" => Some(200003),
            "<|message|>" => Some(200008),
            "<|call|>" => Some(200012),
            _ => None,
        };
        let g = lark(forced_call_grammar(
            ToolCallFormat::Openai,
            &[&a, &b],
            true,
            ids,
        ));
        let first = "answer: <[200005]> \"commentary to=functions.a \" <[200003]> \"json\" <[200008]> %json {";
        assert!(g.starts_with("start: analysis? answer\n"), "{g}");
        assert!(g.contains(first), "{g}");
        assert!(
            g.contains("| <[200005]> \"commentary to=functions.b \""),
            "{g}"
        );
        assert!(g.trim_end().ends_with("} <[200012]>"), "{g}");
    }
}
