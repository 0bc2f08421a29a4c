use super::*;
use crate::output::tool_calls::ToolCallFormat;

fn tools(parallel: bool) -> Option<ToolParsing> {
    Some(ToolParsing::new(ToolCallFormat::Openai, parallel))
}

fn parse(text: &str, tools: Option<ToolParsing>) -> Vec<HarmonyEvent> {
    let mut parser = HarmonyParser::new(true, tools);
    let mut out = Vec::new();
    parser.feed(text, &mut out);
    parser.finish(&mut out);
    merge(out)
}

/// Character by character: the events, once neighbours of one kind are joined, are those of
/// the whole text at once.
fn streamed(text: &str, tools: Option<ToolParsing>) -> Vec<HarmonyEvent> {
    let mut parser = HarmonyParser::new(true, tools);
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        parser.feed(&text[i..i + c.len_utf8()], &mut out);
    }
    parser.finish(&mut out);
    merge(out)
}

fn merge(events: Vec<HarmonyEvent>) -> Vec<HarmonyEvent> {
    let mut merged: Vec<HarmonyEvent> = Vec::new();
    for e in events {
        match (merged.last_mut(), e) {
            (Some(HarmonyEvent::Reasoning(a)), HarmonyEvent::Reasoning(b))
            | (Some(HarmonyEvent::Content(a)), HarmonyEvent::Content(b)) => a.push_str(&b),
            (_, e) => merged.push(e),
        }
    }
    merged
}

fn reasoning(t: &str) -> HarmonyEvent {
    HarmonyEvent::Reasoning(t.into())
}

fn content(t: &str) -> HarmonyEvent {
    HarmonyEvent::Content(t.into())
}

fn call(name: &str, arguments: &str) -> HarmonyEvent {
    HarmonyEvent::Call(ParsedToolCall {
        name: name.into(),
        arguments: arguments.into(),
    })
}

fn check(text: &str, tools: Option<ToolParsing>, want: &[HarmonyEvent]) {
    assert_eq!(parse(text, tools.clone()), want, "whole: {text}");
    assert_eq!(streamed(text, tools), want, "streamed: {text}");
}

#[test]
fn analysis_is_reasoning_and_final_is_content() {
    check(
        "<|channel|>analysis<|message|>User says hi. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
        None,
        &[reasoning("User says hi. Reply."), content("Hello! How can I help?")],
    );
}

#[test]
fn a_commentary_message_to_a_function_is_a_call() {
    // The recipient after the channel, with <|constrain|> (how gpt-oss writes calls) and
    // before it (how the chat template renders them in the history).
    let after = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>";
    let before = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": \"Paris\"}<|call|>";
    let want = [
        reasoning("Need the weather."),
        call("get_weather", "{\"location\": \"Paris\"}"),
    ];
    check(after, tools(true), &want);
    check(before, tools(true), &want);
}

#[test]
fn a_preamble_is_content_and_parallel_calls_follow_the_request() {
    let text = "<|channel|>commentary<|message|>Checking both cities.<|end|><|start|>assistant<|channel|>commentary to=functions.w <|constrain|>json<|message|>{\"c\": \"A\"}<|call|><|start|>assistant<|channel|>commentary to=functions.w <|constrain|>json<|message|>{\"c\": \"B\"}<|call|>";
    check(
        text,
        tools(true),
        &[
            content("Checking both cities."),
            call("w", "{\"c\": \"A\"}"),
            call("w", "{\"c\": \"B\"}"),
        ],
    );
    check(
        text,
        tools(false),
        &[
            content("Checking both cities."),
            call("w", "{\"c\": \"A\"}"),
        ],
    );
}

#[test]
fn without_tools_a_call_is_the_text_the_model_wrote() {
    check(
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
        None,
        &[content("{}")],
    );
}

#[test]
fn a_call_cut_short_still_comes_out_and_empty_arguments_are_an_object() {
    check(
        "<|channel|>commentary to=functions.f<|message|>{\"a\": 1",
        tools(true),
        &[call("f", "{\"a\": 1")],
    );
    check(
        "<|channel|>commentary to=functions.f<|message|><|call|>",
        tools(true),
        &[call("f", "{}")],
    );
    // A forced call (a grammar wrote it) cut short is dropped; a whole one comes out.
    let forced = tools(true).map(|t| ToolParsing { forced: true, ..t });
    let cut = "<|channel|>analysis<|message|>Go.<|end|><|start|>assistant\
               <|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1";
    check(cut, forced.clone(), &[reasoning("Go.")]);
    check(
        &format!("{cut}}}<|call|>"),
        forced,
        &[reasoning("Go."), call("f", "{\"a\": 1}")],
    );
}

#[test]
fn reasoning_off_makes_analysis_content() {
    let mut parser = HarmonyParser::new(false, None);
    let mut out = Vec::new();
    parser.feed(
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
        &mut out,
    );
    parser.finish(&mut out);
    assert_eq!(merge(out), [content("ab")]);
}

#[test]
fn text_that_is_not_harmony_is_content() {
    // Markers left out between messages, a stray end, text after the last message, and text
    // without any header (a model that does not write harmony).
    check(
        "<|channel|>analysis<|message|>r<|end|><|channel|>final<|message|>c<|end|> tail",
        None,
        &[reasoning("r"), content("c tail")],
    );
    let plain = "Just an answer. ".repeat(30);
    check(&plain, None, &[content(&plain)]);
    check("short", None, &[content("short")]);
}

#[test]
fn messages_to_built_in_tools_are_reasoning() {
    check(
        "<|channel|>analysis to=browser.search <|constrain|>json<|message|>{\"query\": \"x\"}<|call|>",
        tools(true),
        &[reasoning("{\"query\": \"x\"}")],
    );
}

#[test]
fn headers_read_channel_and_recipient_wherever_they_stand() {
    let h = Header::parse(" to=functions.get_weather<|channel|>commentary json");
    assert_eq!(h.channel.as_deref(), Some("commentary"));
    assert_eq!(h.recipient.as_deref(), Some("functions.get_weather"));
    let h = Header::parse("assistant<|channel|>commentary to=functions.f <|constrain|>json");
    assert_eq!(h.channel.as_deref(), Some("commentary"));
    assert_eq!(h.recipient.as_deref(), Some("functions.f"));
    assert_eq!(
        Header::parse("<|channel|>final"),
        Header {
            channel: Some("final".into()),
            recipient: None
        }
    );
}

/// Completions as gpt-oss writes them, with the messages openai-harmony parses from their
/// tokens (`scripts/make_harmony_fixtures.py`).
const COMPLETIONS: &str = include_str!("../../../tests/fixtures/harmony/completions.json");

#[test]
fn completions_read_as_openai_harmony_parses_them() {
    let completions: Vec<serde_json::Value> = serde_json::from_str(COMPLETIONS).unwrap();
    assert!(!completions.is_empty());
    for completion in completions {
        let text = completion["text"].as_str().unwrap();
        // Each parsed message, mapped to the OpenAI fields as the module documents.
        let want: Vec<HarmonyEvent> = completion["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let body = m["text"].as_str().unwrap();
                match (m["channel"].as_str(), m["recipient"].as_str()) {
                    (_, Some(to)) => call(to.strip_prefix("functions.").unwrap(), body),
                    (Some("analysis"), None) => reasoning(body),
                    _ => content(body),
                }
            })
            .collect();
        check(text, tools(true), &merge(want));
    }
}
