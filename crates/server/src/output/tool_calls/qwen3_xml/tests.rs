use serde_json::{json, Value};

use crate::output::tool_calls::stream::join_events;
use crate::output::tool_calls::{
    parse_complete, ParsedToolCall, ToolCallFormat, ToolCallParser, ToolParsing,
};

fn call(name: &str, arguments: &str) -> ParsedToolCall {
    ParsedToolCall {
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// Qwen3.5's parsing with `tools` offered as (name, parameters schema).
fn parsing(tools: &[(&str, Value)]) -> ToolParsing {
    ToolParsing {
        tool_names: tools.iter().map(|(n, _)| n.to_string()).collect(),
        tool_schemas: tools
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect::<Vec<_>>()
            .into(),
        ..ToolParsing::new(ToolCallFormat::Qwen3Coder, true)
    }
}

fn weather() -> ToolParsing {
    parsing(&[(
        "get_weather",
        json!({"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "f"]},
            "days": {"type": "integer"}}}),
    )])
}

fn streamed(parsing: &ToolParsing, text: &str, cuts: &[usize]) -> (String, Vec<ParsedToolCall>) {
    let mut parser = ToolCallParser::new(parsing.clone());
    let mut events = Vec::new();
    let mut last = 0;
    for &cut in cuts.iter().chain(std::iter::once(&text.len())) {
        parser.feed(&text[last..cut], &mut events);
        last = cut;
    }
    parser.finish(&mut events);
    join_events(events)
}

/// The complete answer, after checking that every split in two and the text fed one
/// character at a time give the same.
fn parsed(parsing: &ToolParsing, text: &str) -> (String, Vec<ParsedToolCall>) {
    let whole = parse_complete(parsing, text);
    let boundaries: Vec<usize> = (1..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    for &cut in &boundaries {
        assert_eq!(
            streamed(parsing, text, &[cut]),
            whole,
            "{text:?} cut at {cut}"
        );
    }
    assert_eq!(
        streamed(parsing, text, &boundaries),
        whole,
        "{text:?} char by char"
    );
    whole
}

const PARIS: &str = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>";

#[test]
fn a_call_and_the_text_before_it() {
    let text = format!("Let me check the weather.\n\n{PARIS}");
    assert_eq!(
        parsed(&weather(), &text),
        (
            "Let me check the weather.".to_string(),
            vec![call(
                "get_weather",
                r#"{"city": "Paris", "unit": "celsius"}"#
            )]
        )
    );
}

#[test]
fn several_calls_one_after_another() {
    let tokyo = "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    let none = "<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
    let text = format!("{PARIS}\n{tokyo}\n{none}\n");
    let (content, calls) = parsed(&weather(), &text);
    assert_eq!(content, "");
    assert_eq!(
        calls,
        vec![
            call("get_weather", r#"{"city": "Paris", "unit": "celsius"}"#),
            call("get_weather", r#"{"city": "Tokyo", "days": 3}"#),
            call("get_time", "{}"),
        ]
    );
    // parallel_tool_calls false keeps the first.
    let first = ToolParsing {
        parallel: false,
        ..weather()
    };
    assert_eq!(parse_complete(&first, &text).1.len(), 1);
}

#[test]
fn multi_line_values_keep_their_lines_but_not_the_layout_newlines() {
    let text = "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.py\n</parameter>\n<parameter=content>\ndef f():\n    return \"</parameter> ✓\"\n\n</parameter>\n</function>\n</tool_call>";
    let (_, calls) = parsed(&parsing(&[]), text);
    let arguments: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(
        arguments,
        json!({"path": "/tmp/a.py", "content": "def f():\n    return \"</parameter> ✓\"\n"})
    );
}

#[test]
fn values_take_the_type_their_schema_gives() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
        "py_bool": {"type": "boolean"}, "opts": {"type": "object"}, "ids": {"type": "array"},
        "zip": {"type": "string"}, "maybe": {"type": ["integer", "null"]},
        "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "level": {"enum": [1, 2, 3]}, "bad_n": {"type": "integer"}}});
    let p = parsing(&[("f", schema)]);
    let params = [
        ("n", "42"),
        ("x", "-1.5e3"),
        ("ok", "true"),
        ("py_bool", "False"),
        ("opts", "{\"a\": [1, {\"b\": null}]}"),
        ("ids", "[1, 2]"),
        ("zip", "01234"),
        ("maybe", "None"),
        ("either", "null"),
        ("level", "2"),
        ("bad_n", "many"),
        ("unknown", "7"),
    ];
    let mut text = "<tool_call>\n<function=f>\n".to_string();
    for (k, v) in params {
        text += &format!("<parameter={k}>\n{v}\n</parameter>\n");
    }
    text += "</function>\n</tool_call>";
    let (_, calls) = parsed(&p, &text);
    assert_eq!(
        calls[0].arguments,
        r#"{"n": 42, "x": -1.5e3, "ok": true, "py_bool": false, "opts": {"a": [1, {"b": null}]}, "ids": [1, 2], "zip": "01234", "maybe": null, "either": null, "level": 2, "bad_n": "many", "unknown": "7"}"#
    );
    let value: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(value["x"], json!(-1500.0));
    // Without a schema every value is a string.
    let (_, calls) = parsed(&parsing(&[]), &text);
    let value: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!((&value["n"], &value["ok"]), (&json!("42"), &json!("true")));
}

#[test]
fn a_repeated_parameter_keeps_its_place_and_the_last_value() {
    let text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n<parameter=a>\n3\n</parameter>\n</function>\n</tool_call>";
    assert_eq!(
        parsed(&parsing(&[]), text).1,
        vec![call("f", r#"{"a": "3", "b": "2"}"#)]
    );
}

#[test]
fn a_missing_parameter_close_ends_at_the_next_parameter() {
    let text = "<tool_call>\n<function=f>\n<parameter=a>\nx\n<parameter=b>\ny\n</parameter>\n</function>\n</tool_call>";
    assert_eq!(
        parsed(&parsing(&[]), text).1,
        vec![call("f", r#"{"a": "x", "b": "y"}"#)]
    );
}

#[test]
fn an_unterminated_block_counts_when_its_function_is_complete() {
    let text = "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n</function>\n";
    assert_eq!(
        parsed(&weather(), text),
        (
            "Sure.".to_string(),
            vec![call("get_weather", r#"{"city": "São Paulo"}"#)]
        )
    );
}

#[test]
fn malformed_or_cut_off_blocks_stay_content() {
    for text in [
        // Cut off by max_tokens, inside a value and inside the function.
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call> after",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n<function={{ name }}>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f",
        "text with a <tool_ but no call",
        "a <function=f> mentioned in passing",
    ] {
        let (content, calls) = parsed(&weather(), text);
        assert!(calls.is_empty(), "{text}");
        assert_eq!(content, text);
    }
}

#[test]
fn a_malformed_block_before_a_good_one_is_content() {
    let text = format!("<tool_call>oops</tool_call>\n{PARIS}");
    assert_eq!(
        parsed(&weather(), &text),
        (
            "<tool_call>oops</tool_call>".to_string(),
            vec![call(
                "get_weather",
                r#"{"city": "Paris", "unit": "celsius"}"#
            )]
        )
    );
}

#[test]
fn the_format_is_detected_before_hermes() {
    let qwen35 = "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>\\n' }}";
    assert_eq!(
        ToolCallFormat::detect(qwen35),
        Some(ToolCallFormat::Qwen3Coder)
    );
    assert_eq!(
        ToolCallFormat::detect("{{ '<tool_call>' }}"),
        Some(ToolCallFormat::Hermes)
    );
    assert_eq!(ToolCallFormat::Qwen3Coder.name(), "qwen3_coder");
    assert!(!ToolCallFormat::Qwen3Coder.needs_special_tokens());
}

#[test]
fn a_value_may_hold_a_whole_parameter_written_as_text() {
    let text = "<tool_call>\n<function=write>\n<parameter=doc>\nA call looks like:\n<parameter=city>\nParis\n</parameter>\nend\n</parameter>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>";
    assert_eq!(
        parsed(&parsing(&[]), text).1,
        vec![call(
            "write",
            r#"{"doc": "A call looks like:\n<parameter=city>\nParis\n</parameter>\nend", "n": "1"}"#
        )]
    );
}

/// The assistant turn of Qwen3.5's template (its tool-call rendering and generation prompt,
/// written from the template's definition).
const QWEN35_TURNS: &str = r#"{%- for message in messages %}
{%- if message.role == "assistant" %}
{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' + (message.content or '') }}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{%- if loop.first %}{{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}
{%- else %}{{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}{%- endif %}
{%- for args_name, args_value in tool_call.arguments|items %}
{{- '<parameter=' + args_name + '>\n' }}
{%- set args_value = args_value | string if args_value is string else args_value | tojson | safe %}
{{- args_value }}
{{- '\n</parameter>\n' }}
{%- endfor %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}
{%- else %}
{{- '<|im_start|>assistant\n<think>\n' }}
{%- endif %}
{%- endif %}"#;

#[test]
fn what_the_template_writes_for_calls_is_what_the_parser_reads_back() {
    use crate::openai::chat::{template_inputs, ChatMessage};
    let arguments = json!({"city": "Paris", "days": 3, "opts": {"metric": true, "tags": ["a"]},
        "note": "two\nlines", "zip": "01234"});
    let messages: Vec<ChatMessage> = serde_json::from_value(json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                "arguments": arguments.to_string()}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time",
                "arguments": "{}"}}]},
    ]))
    .unwrap();
    let inputs = template_inputs(messages, false, None, None).unwrap();
    let template = crate::ChatTemplate::new(QWEN35_TURNS, None, Some("<|im_end|>")).unwrap();
    let text = template.render_inputs(&inputs).unwrap();
    let turn = text
        .split("</think>\n\n")
        .nth(1)
        .and_then(|t| t.split("<|im_end|>").next())
        .unwrap();
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
        "days": {"type": "integer"}, "opts": {"type": "object"}, "note": {"type": "string"},
        "zip": {"type": "string"}}});
    let (content, calls) = parsed(&parsing(&[("get_weather", schema)]), turn);
    assert_eq!(content, "");
    assert_eq!(calls.len(), 2, "{turn}");
    let back: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(back, arguments);
    assert_eq!(calls[1], call("get_time", "{}"));
}

#[test]
fn qwen35_answers_start_inside_the_think_block_the_prompt_opened() {
    use crate::output::assistant_output::{parse_answer, OutputSpec};
    use crate::output::reasoning::ReasoningFormat;
    let template = QWEN35_TURNS;
    assert_eq!(
        ReasoningFormat::detect(&format!("{template}<think>")),
        Some(ReasoningFormat::Qwen3)
    );
    let thinking = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n";
    let not_thinking = format!("{thinking}\n</think>\n\n");
    let format = ReasoningFormat::Qwen3;
    let spec = |prompt: &str| OutputSpec {
        reasoning: Some((format, format.starts_in_reasoning(prompt))),
        tools: Some(weather()),
    };
    let answer = parse_answer(
        &spec(thinking),
        &format!("The user wants Paris.\n</think>\n\n{PARIS}"),
    );
    assert_eq!(answer.reasoning.as_deref(), Some("The user wants Paris.\n"));
    assert_eq!(answer.content, None);
    assert_eq!(answer.tool_calls.len(), 1);
    // With enable_thinking false the prompt closed the block: all of it is the answer.
    let answer = parse_answer(&spec(&not_thinking), &format!("Checking.\n\n{PARIS}"));
    assert_eq!(
        (answer.reasoning, answer.content.as_deref()),
        (None, Some("Checking."))
    );
    assert_eq!(answer.tool_calls.len(), 1);
}
