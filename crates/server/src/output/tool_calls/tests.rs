use super::*;

fn call(name: &str, arguments: &str) -> ParsedToolCall {
    ParsedToolCall {
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// Feeds `text` in pieces cut at `cuts` and returns the joined content and the calls.
fn streamed(format: ToolCallFormat, text: &str, cuts: &[usize]) -> (String, Vec<ParsedToolCall>) {
    let mut parser = ToolCallParser::new(ToolParsing::new(format, true));
    let mut events = Vec::new();
    let mut last = 0;
    for &cut in cuts.iter().chain(std::iter::once(&text.len())) {
        parser.feed(&text[last..cut], &mut events);
        last = cut;
    }
    parser.finish(&mut events);
    stream::join_events(events)
}

/// Every split of `text` in two, and in pieces of one character, gives the complete answer.
fn assert_any_split_agrees(format: ToolCallFormat, text: &str) {
    let whole = parse_complete(&ToolParsing::new(format, true), text);
    let boundaries: Vec<usize> = (1..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    for &cut in &boundaries {
        assert_eq!(
            streamed(format, text, &[cut]),
            whole,
            "{text:?} cut at {cut}"
        );
    }
    assert_eq!(
        streamed(format, text, &boundaries),
        whole,
        "{text:?} char by char"
    );
}

#[test]
fn hermes_calls_and_the_text_around_them() {
    let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    let (content, calls) = parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text);
    assert_eq!(content, "Let me check.");
    assert_eq!(
        calls,
        vec![
            call("get_weather", "{\"city\": \"Paris\", \"unit\": \"c\"}"),
            call("get_time", "{}")
        ]
    );
    assert_any_split_agrees(ToolCallFormat::Hermes, text);
}

#[test]
fn only_calls_leave_no_content_and_parallel_false_keeps_the_first() {
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\"}\n</tool_call>\n";
    let (content, calls) = parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text);
    assert_eq!((content.as_str(), calls.len()), ("", 2));
    let (_, first) = parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, false), text);
    assert_eq!(first, vec![call("a", "{\"x\": 1}")]);
}

#[test]
fn an_unterminated_call_at_the_end_still_counts() {
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"é ✓\"}}\n";
    let (content, calls) = parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text);
    assert_eq!(content, "");
    assert_eq!(calls, vec![call("a", "{\"q\": \"é ✓\"}")]);
    assert_any_split_agrees(ToolCallFormat::Hermes, text);
}

#[test]
fn malformed_calls_fall_back_to_plain_content() {
    for text in [
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call> after",
        "<tool_call>not json</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
        "<tool_call>{\"name\": \"a\"",
        "text with a <tool_ but no call",
        "a < b and <tool> tags",
    ] {
        let (content, calls) =
            parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text);
        assert!(calls.is_empty(), "{text}");
        assert_eq!(content, text);
        assert_any_split_agrees(ToolCallFormat::Hermes, text);
    }
}

#[test]
fn a_malformed_block_before_a_good_one_is_content() {
    let text = "<tool_call>oops</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": 2}\"}</tool_call>";
    let (content, calls) = parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text);
    assert_eq!(content, "<tool_call>oops</tool_call>");
    // Arguments written as a JSON string holding an object are unwrapped.
    assert_eq!(calls, vec![call("f", "{\"k\": 2}")]);
    assert_any_split_agrees(ToolCallFormat::Hermes, text);
}

#[test]
fn text_without_calls_is_unchanged_whitespace_included() {
    let text = "  Hello,\n world ✓ \n\n";
    assert_eq!(
        parse_complete(&ToolParsing::new(ToolCallFormat::Hermes, true), text),
        (text.to_string(), vec![])
    );
    assert_any_split_agrees(ToolCallFormat::Hermes, text);
    assert_any_split_agrees(ToolCallFormat::Llama3Json, text);
    assert_any_split_agrees(ToolCallFormat::Mistral, text);
}

#[test]
fn llama3_json_calls_with_and_without_the_python_tag() {
    let one = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    assert_eq!(
        parse_complete(&ToolParsing::new(ToolCallFormat::Llama3Json, true), one),
        (
            String::new(),
            vec![call("get_weather", "{\"city\": \"Oslo\"}")]
        )
    );
    let two = "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"n\": 1}}";
    assert_eq!(
        parse_complete(&ToolParsing::new(ToolCallFormat::Llama3Json, true), two).1,
        vec![call("a", "{}"), call("b", "{\"n\": 1}")]
    );
    // JSON that is not a call, and a call after text, are plain answers.
    for text in [
        "{\"answer\": 42}",
        "Sure: {\"name\": \"a\", \"parameters\": {}}",
    ] {
        assert_eq!(
            parse_complete(&ToolParsing::new(ToolCallFormat::Llama3Json, true), text),
            (text.to_string(), vec![])
        );
        assert_any_split_agrees(ToolCallFormat::Llama3Json, text);
    }
    assert_any_split_agrees(ToolCallFormat::Llama3Json, one);
    assert_any_split_agrees(ToolCallFormat::Llama3Json, two);
}

#[test]
fn mistral_tool_calls_list() {
    let text = "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": \"y\"}}, {\"name\": \"b\", \"arguments\": {}}]";
    assert_eq!(
        parse_complete(&ToolParsing::new(ToolCallFormat::Mistral, true), text),
        (
            String::new(),
            vec![call("a", "{\"x\": \"y\"}"), call("b", "{}")]
        )
    );
    assert_any_split_agrees(ToolCallFormat::Mistral, text);
    let broken = "Hi [TOOL_CALLS][{\"name\": \"a\"";
    assert_eq!(
        parse_complete(&ToolParsing::new(ToolCallFormat::Mistral, true), broken),
        (broken.to_string(), vec![])
    );
}

#[test]
fn formats_are_detected_from_the_template() {
    assert_eq!(
        ToolCallFormat::detect("{{ '<tool_call>' }}"),
        Some(ToolCallFormat::Hermes)
    );
    assert_eq!(
        ToolCallFormat::detect("[TOOL_CALLS] {{ x }}"),
        Some(ToolCallFormat::Mistral)
    );
    assert_eq!(
        ToolCallFormat::detect("<|start_header_id|>ipython"),
        Some(ToolCallFormat::Llama3Json)
    );
    assert_eq!(ToolCallFormat::detect("{{ m.content }}"), None);
}

#[test]
fn a_partial_marker_is_held_back_until_known() {
    let mut parser = ToolCallParser::new(ToolParsing::new(ToolCallFormat::Hermes, true));
    let mut out = Vec::new();
    parser.feed("Hi <tool_", &mut out);
    assert_eq!(out, vec![ToolEvent::Content("Hi".into())]);
    out.clear();
    parser.feed("box>", &mut out);
    assert_eq!(out, vec![ToolEvent::Content(" <tool_box>".into())]);
}

#[test]
fn a_bare_call_answer_naming_an_offered_tool_is_a_call() {
    let parsing = ToolParsing {
        tool_names: std::sync::Arc::from(vec!["get_weather".to_string()]),
        ..ToolParsing::new(ToolCallFormat::Hermes, true)
    };
    let text = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n";
    assert_eq!(
        parse_complete(&parsing, text),
        (
            String::new(),
            vec![call("get_weather", "{\"city\": \"Tokyo\"}")]
        )
    );
    let two = format!("{text}{text}");
    assert_eq!(parse_complete(&parsing, &two).1.len(), 2);
    // JSON answers that are not a call to an offered tool stay answers.
    for text in [
        "{\"name\": \"other\", \"arguments\": {}}",
        "{\"answer\": 1}",
        "{\"name\": \"get_weather\"} and more",
        "text {\"name\": \"get_weather\", \"arguments\": {}}",
    ] {
        assert_eq!(
            parse_complete(&parsing, text),
            (text.to_string(), vec![]),
            "{text}"
        );
    }
    for text in [text, "  {\"answer\": 1} <tool_call>"] {
        let whole = parse_complete(&parsing, text);
        for cut in (1..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let mut parser = ToolCallParser::new(parsing.clone());
            let mut events = Vec::new();
            parser.feed(&text[..cut], &mut events);
            parser.feed(&text[cut..], &mut events);
            parser.finish(&mut events);
            assert_eq!(stream::join_events(events), whole, "{text:?} at {cut}");
        }
    }
}

#[test]
fn a_forced_answer_cut_short_leaks_nothing_into_content() {
    let forced = ToolParsing {
        forced: true,
        ..ToolParsing::new(ToolCallFormat::Hermes, true)
    };
    let one = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
    let cut = format!("{one}\n\n<tool_call>\n{{\"name\": \"");
    assert_eq!(
        parse_complete(&forced, &cut),
        (String::new(), vec![call("a", "{}")])
    );
    assert_eq!(
        parse_complete(&forced, "<tool_call>\n{\"na"),
        (String::new(), vec![])
    );
    // The same text read for calls that were not forced shows what cannot be a call.
    let free = ToolParsing::new(ToolCallFormat::Hermes, true);
    assert_eq!(
        parse_complete(&free, &cut).0,
        "\n\n<tool_call>\n{\"name\": \""
    );
}
