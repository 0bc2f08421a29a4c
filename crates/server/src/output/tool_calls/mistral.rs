//! Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` to the end of the answer
//! (`[TOOL_CALLS]` is a special token).

use serde_json::value::RawValue;

use super::call_object::CallObject;
use super::{Markers, ParsedToolCall};

pub const MARKERS: Markers = Markers {
    starts: &[("[TOOL_CALLS]", false)],
    only_at_start: false,
    end: None,
    bare_call_answer: false,
};

/// A list of call objects, or one.
pub fn parse_body(body: &str) -> Option<Vec<ParsedToolCall>> {
    let body = body.trim();
    if body.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(body).ok()?;
        items
            .into_iter()
            .map(|raw| {
                serde_json::from_str::<CallObject>(raw.get())
                    .ok()?
                    .into_call()
            })
            .collect()
    } else {
        super::call_object::parse_one(body).map(|c| vec![c])
    }
}
