use ferrite_engine::{Constraint, TokenMask};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::*;
use crate::openai::structured::{GrammarRequest, RequestedGrammar};
use crate::output::structured::Grammars;
use crate::output::tool_calls::{forced_call_grammar, parse_complete, ToolCallFormat, ToolParsing};
use crate::testing::byte_level_tokenizer;

fn spec(name: &str, parameters: Value) -> ToolSpec {
    serde_json::from_value(json!({
        "type": "function",
        "function": {"name": name, "parameters": parameters}
    }))
    .unwrap()
}

fn weather() -> ToolSpec {
    spec(
        "get_weather",
        json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 9},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}),
    )
}

fn vocab() -> usize {
    byte_level_tokenizer().get_vocab_size(true) + 7
}

fn compile(tools: &[&ToolSpec], parallel: bool) -> Constraint {
    compile_format(ToolCallFormat::Qwen3Coder, tools, parallel)
}

/// The forcing grammar of `format` over a byte-level tokenizer (markers spelled out).
pub(in crate::output::tool_calls) fn compile_format(
    format: ToolCallFormat,
    tools: &[&ToolSpec],
    parallel: bool,
) -> Constraint {
    let tokenizer = byte_level_tokenizer();
    let grammars = Grammars::new(tokenizer, vocab(), Some("<|im_end|>".into()));
    let grammar = forced_call_grammar(format, tools, parallel, |_| None);
    grammars
        .constraint_blocking(&RequestedGrammar {
            grammar,
            param: "tools",
        })
        .unwrap_or_else(|e| panic!("{}", e.message))
}

/// Whether the grammar lets the model write `text` and then end.
pub(in crate::output::tool_calls) fn accepts(constraint: &Constraint, text: &str) -> bool {
    let tokens = byte_level_tokenizer().encode(text, false).unwrap();
    let mut live = constraint.0.start();
    let mut mask = TokenMask::new(vocab());
    for &token in tokens.get_ids() {
        if live.is_finished() {
            return false;
        }
        mask.reset(vocab());
        live.allowed(&mut mask).unwrap();
        if !mask.is_allowed(token) {
            return false;
        }
        live.accept(token).unwrap();
    }
    if live.is_finished() {
        return true;
    }
    mask.reset(vocab());
    live.allowed(&mut mask).unwrap();
    mask.end_allowed()
}

fn parsing(tools: &[&ToolSpec]) -> ToolParsing {
    ToolParsing {
        tool_names: tools.iter().map(|t| t.function.name.clone()).collect(),
        tool_schemas: tools
            .iter()
            .map(|t| {
                (
                    t.function.name.clone(),
                    t.function.parameters.clone().unwrap(),
                )
            })
            .collect::<Vec<_>>()
            .into(),
        ..ToolParsing::new(ToolCallFormat::Qwen3Coder, true)
    }
}

const PARIS: &str = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis, \"</parameter>\" & co\nline 2\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

#[test]
fn the_grammar_reads_as_the_template_writes_calls() {
    let w = weather();
    let lark = lark(&[&w], false, |m| format!("<{m}>"));
    assert!(lark.starts_with("start: block \"\\n\"?\n"), "{lark}");
    assert!(
        lark.contains("block: <<tool_call>> \"\\n\" call \"\\n\" <</tool_call>>"),
        "{lark}"
    );
    // Properties in the schema's (sorted) order; only `city` is required.
    assert!(
        lark.contains(
            "call_0: \"<function=get_weather>\\n\" param_0_0 param_0_1? param_0_2? \"</function>\""
        ),
        "{lark}"
    );
    assert!(
        lark.contains("param_0_0: \"<parameter=city>\\n\" any_text"),
        "{lark}"
    );
    assert!(lark.contains("value_0_1: %json {"), "{lark}");
    assert!(
        lark.contains("value_0_2: (\"celsius\" | \"fahrenheit\") \"\\n</parameter>\\n\""),
        "{lark}"
    );
    let parallel = lark_of(&[&w], true);
    assert!(
        parallel.starts_with("start: block (\"\\n\" block)* \"\\n\"?\n"),
        "{parallel}"
    );
}

fn lark_of(tools: &[&ToolSpec], parallel: bool) -> String {
    match forced_call_grammar(ToolCallFormat::Qwen3Coder, tools, parallel, |_| None) {
        GrammarRequest::Lark(l) => l,
        other => panic!("not Lark: {other:?}"),
    }
}

#[test]
fn a_forced_call_compiles_and_ends_after_its_block() {
    let w = weather();
    let one = compile(&[&w], false);
    assert!(accepts(&one, PARIS));
    assert!(accepts(&one, &format!("{PARIS}\n")));
    // One call only: no second block, and no text after the call.
    assert!(!accepts(&one, &format!("{PARIS}\n{PARIS}")));
    assert!(!accepts(&one, &format!("{PARIS} done")));
    let many = compile(&[&w], true);
    assert!(accepts(&many, &format!("{PARIS}\n{PARIS}")));
    assert!(accepts(&many, PARIS), "the answer may end after any block");
    for bad in [
        // The required `city` left out, a value outside the schema, an unknown tool, prose.
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=days>\n30\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        "The weather is nice.",
    ] {
        assert!(!accepts(&many, bad), "{bad}");
    }
    // What the grammar lets through, the parser reads as the call.
    let (content, calls) = parse_complete(&parsing(&[&w]), PARIS);
    assert_eq!(content, "");
    assert_eq!(
        calls[0].arguments,
        r#"{"city": "Paris, \"</parameter>\" & co\nline 2", "days": 3}"#
    );
}

#[test]
fn tools_without_declared_parameters_take_any_string_parameters() {
    let free = spec("run", json!({"type": "object"}));
    let g = compile(&[&free], false);
    assert!(accepts(
        &g,
        "<tool_call>\n<function=run>\n</function>\n</tool_call>"
    ));
    assert!(accepts(
        &g,
        "<tool_call>\n<function=run>\n<parameter=cmd>\nls -l\n</parameter>\n</function>\n</tool_call>"
    ));
}

#[test]
fn definitions_come_along_with_a_parameter_that_refers_to_them() {
    let t = spec(
        "f",
        json!({"type": "object", "$defs": {"p": {"type": "object", "properties":
            {"x": {"type": "integer"}}, "required": ["x"]}},
            "properties": {"point": {"$ref": "#/$defs/p"}}, "required": ["point"]}),
    );
    // A `$ref` names no type: its value is free text.
    assert!(lark_of(&[&t], false).contains("param_0_0: \"<parameter=point>\\n\" any_text"));
    let typed = spec(
        "g",
        json!({"type": "object", "$defs": {"n": {"type": "integer"}},
            "properties": {"p": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
            "required": ["p"]}),
    );
    let g = compile(&[&typed], false);
    assert!(accepts(
        &g,
        "<tool_call>\n<function=g>\n<parameter=p>\n[1, 2]\n</parameter>\n</function>\n</tool_call>"
    ));
    assert!(!accepts(&g, "<tool_call>\n<function=g>\n<parameter=p>\n[\"a\"]\n</parameter>\n</function>\n</tool_call>"));
}

/// A random walk through what the grammar allows (a "model" with random logits).
fn random_output(constraint: &Constraint, seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut live = constraint.0.start();
    let mut mask = TokenMask::new(vocab());
    let mut tokens = Vec::new();
    for _ in 0..600 {
        mask.reset(vocab());
        live.allowed(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..vocab() as u32)
            .filter(|&t| mask.is_allowed(t))
            .collect();
        if mask.end_allowed() && (allowed.is_empty() || rng.random_bool(0.5)) {
            break;
        }
        assert!(!allowed.is_empty(), "a dead end after {tokens:?}");
        let token = allowed[rng.random_range(0..allowed.len())];
        live.accept(token).unwrap();
        tokens.push(token);
        if live.is_finished() {
            break;
        }
    }
    byte_level_tokenizer().decode(&tokens, false).unwrap()
}

#[test]
fn random_walks_give_calls_the_parser_reads_with_their_types() {
    let t = spec(
        "set",
        json!({"type": "object", "properties": {
            "level": {"type": "integer", "minimum": 0, "maximum": 99},
            "on": {"type": "boolean"},
            "mode": {"type": "string", "enum": ["a", "b"]}},
            "required": ["level", "on", "mode"]}),
    );
    let g = compile(&[&t], true);
    let p = parsing(&[&t]);
    for seed in 0..10 {
        let text = random_output(&g, seed);
        let (content, calls) = parse_complete(&p, &text);
        assert!(content.is_empty() && !calls.is_empty(), "{text:?}");
        for call in calls {
            let args: Value = serde_json::from_str(&call.arguments).unwrap();
            assert!(
                args["level"]
                    .as_i64()
                    .is_some_and(|n| (0..=99).contains(&n)),
                "{text:?}"
            );
            assert!(args["on"].is_boolean(), "{text:?}");
            assert!(args["mode"] == "a" || args["mode"] == "b", "{text:?}");
        }
    }
}
