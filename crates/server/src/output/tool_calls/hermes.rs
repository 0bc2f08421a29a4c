//! Hermes and Qwen2.5/Qwen3: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
//! as many blocks as calls, anywhere in the answer.

use super::call_object::parse_one;
use super::{Markers, ParsedToolCall};

pub const MARKERS: Markers = Markers {
    starts: &[("<tool_call>", false)],
    only_at_start: false,
    end: Some("</tool_call>"),
    bare_call_answer: true,
};

pub fn parse_body(body: &str) -> Option<Vec<ParsedToolCall>> {
    parse_one(body).map(|call| vec![call])
}
