use super::*;
use crate::output::reasoning::ReasoningFormat;
use crate::output::tool_calls::{ToolCallFormat, ToolParsing};

fn reasoning_and_tools() -> OutputSpec {
    OutputSpec {
        reasoning: Some((ReasoningFormat::Qwen3, false)),
        tools: Some(ToolParsing::new(ToolCallFormat::Hermes, true)),
    }
}

/// Feeds `text` one character (one "token") at a time; the events and the builder.
fn run(spec: &OutputSpec, text: &str, cut_short: bool) -> (Vec<EventBody>, OutputBuilder) {
    let mut builder = OutputBuilder::new(spec);
    let mut events = Vec::new();
    for (i, c) in text.char_indices() {
        events.extend(builder.feed(&text[i..i + c.len_utf8()], 1));
    }
    events.extend(builder.finish(cut_short));
    (events, builder)
}

fn names(events: &[EventBody]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = events.iter().map(EventBody::name).collect();
    names.dedup();
    names
}

fn message_text(item: &OutputItem) -> Option<&str> {
    match item {
        OutputItem::Message { content, .. } => match content.as_slice() {
            [ContentPart::OutputText { text, .. }] => Some(text),
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn plain_text_is_one_message_whose_deltas_join_to_its_text() {
    let (events, builder) = run(&OutputSpec::default(), "Hello there", false);
    assert_eq!(
        names(&events),
        [
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
        ]
    );
    let joined: String = events
        .iter()
        .filter_map(|e| match e {
            EventBody::OutputTextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(joined, "Hello there");
    let (items, reasoning_tokens) = builder.into_output();
    assert_eq!(items.len(), 1);
    assert_eq!(message_text(&items[0]), Some("Hello there"));
    assert!(items[0].id().starts_with("msg_"));
    assert_eq!(reasoning_tokens, 0);
}

#[test]
fn reasoning_content_and_a_call_become_three_items_in_order() {
    let text = "<think>Need weather.</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let (events, builder) = run(&reasoning_and_tools(), text, false);
    assert_eq!(
        names(&events),
        [
            "response.output_item.added",
            "response.content_part.added",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ]
    );
    // Every event names the index its item ends up at, and `done` carries the final item.
    let done: Vec<(usize, OutputItem)> = events
        .iter()
        .filter_map(|e| match e {
            EventBody::OutputItemDone { output_index, item } => Some((*output_index, item.clone())),
            _ => None,
        })
        .collect();
    let (items, reasoning_tokens) = builder.into_output();
    assert_eq!(done, items.iter().cloned().enumerate().collect::<Vec<_>>());
    match &items[0] {
        OutputItem::Reasoning {
            content,
            summary,
            status,
            ..
        } => {
            assert_eq!(
                content,
                &[ContentPart::ReasoningText {
                    text: "Need weather.".into()
                }]
            );
            assert!(summary.is_empty());
            assert_eq!(*status, ItemStatus::Completed);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(message_text(&items[1]), Some("Let me check."));
    match &items[2] {
        OutputItem::FunctionCall {
            id,
            call_id,
            name,
            arguments,
            status,
        } => {
            assert!(id.starts_with("fc_") && call_id.starts_with("call_"));
            assert_eq!(name, "get_weather");
            assert_eq!(arguments, "{\"city\": \"Paris\"}");
            assert_eq!(*status, ItemStatus::Completed);
        }
        other => panic!("{other:?}"),
    }
    // One token per character: everything up to the answer's first text is reasoning.
    let before_answer = text.find("Let").unwrap();
    assert!(
        (before_answer - 3..=before_answer).contains(&reasoning_tokens),
        "{reasoning_tokens} reasoning tokens, {before_answer} characters before the answer"
    );
}

#[test]
fn whitespace_between_calls_makes_no_message() {
    let call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    let (_, builder) = run(&reasoning_and_tools(), &format!("{call}\n{call}\n"), false);
    let (items, _) = builder.into_output();
    assert_eq!(items.len(), 2);
    assert!(items
        .iter()
        .all(|i| matches!(i, OutputItem::FunctionCall { .. })));
}

#[test]
fn an_empty_answer_is_an_empty_message_and_a_cut_one_is_incomplete() {
    let (_, builder) = run(&OutputSpec::default(), "", false);
    let (items, _) = builder.into_output();
    assert_eq!(items.len(), 1);
    assert_eq!(message_text(&items[0]), Some(""));
    let (_, builder) = run(&reasoning_and_tools(), "<think>still thinking", true);
    let (items, reasoning_tokens) = builder.into_output();
    assert!(matches!(
        &items[..],
        [OutputItem::Reasoning {
            status: ItemStatus::Incomplete,
            ..
        }]
    ));
    assert_eq!(reasoning_tokens, "<think>still thinking".len());
}
