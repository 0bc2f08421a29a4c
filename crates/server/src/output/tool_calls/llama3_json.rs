//! Llama 3.1/3.2/3.3 JSON tool calls: the answer is `{"name": ..., "parameters": {...}}`
//! (optionally after `<|python_tag|>`, several separated by `;` or whitespace), never text then a call.

use super::call_object::CallObject;
use super::{Markers, ParsedToolCall};

pub const MARKERS: Markers = Markers {
    starts: &[("<|python_tag|>", false), ("{", true)],
    only_at_start: true,
    end: None,
    bare_call_answer: false,
};

pub fn parse_body(body: &str) -> Option<Vec<ParsedToolCall>> {
    let mut calls = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<CallObject>();
        let call = values.next()?.ok()?.into_call()?;
        let consumed = values.byte_offset();
        calls.push(call);
        rest = rest[consumed..].trim_start();
        // `;` between calls, or only whitespace (as Llama 3.2 and Qwen2.5-Coder write them).
        if let Some(after) = rest.strip_prefix(';') {
            rest = after.trim_start();
        } else if !rest.is_empty() && !rest.starts_with('{') {
            return None;
        }
    }
    (!calls.is_empty()).then_some(calls)
}
