//! The `{"name": ..., "arguments": {...}}` object every format wraps its calls in.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::ParsedToolCall;

/// Llama 3 writes `parameters` where the others write `arguments`.
#[derive(Deserialize)]
pub struct CallObject<'a> {
    name: String,
    #[serde(borrow, alias = "parameters")]
    arguments: Option<&'a RawValue>,
}

impl CallObject<'_> {
    /// `None` when the arguments are not a JSON object (nor a string holding one, which some
    /// models write).
    pub fn into_call(self) -> Option<ParsedToolCall> {
        let arguments = match self.arguments {
            None => "{}".to_string(),
            Some(raw) => {
                let text = raw.get();
                match serde_json::from_str::<Value>(text).ok()? {
                    Value::Object(_) => text.to_string(),
                    Value::Null => "{}".to_string(),
                    Value::String(inner) => match serde_json::from_str::<Value>(&inner).ok()? {
                        Value::Object(_) => inner,
                        _ => return None,
                    },
                    _ => return None,
                }
            }
        };
        if self.name.is_empty() {
            return None;
        }
        Some(ParsedToolCall {
            name: self.name,
            arguments,
        })
    }
}

/// One call object, the whole of `text` (whitespace around it aside).
pub fn parse_one(text: &str) -> Option<ParsedToolCall> {
    serde_json::from_str::<CallObject>(text.trim())
        .ok()?
        .into_call()
}
