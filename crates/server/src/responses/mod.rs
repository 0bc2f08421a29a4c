//! OpenAI's Responses API (`/v1/responses`): its wire format, its translation to and from the
//! chat path every chat-shaped API shares (`crate::generation::chat_turn`). Finished responses
//! are kept in `crate::app::response_store`.
//!
//! - [`request`]: the request body, refused fields, and the [`crate::generation::chat_turn::ChatTurn`] it asks for;
//! - [`input`]: `input` items (messages, function calls and their outputs) as chat messages;
//! - [`tools`]: function tools, `tool_choice` and `text.format`;
//! - [`object`]: the `response` object and its output items;
//! - [`events`]: the streamed events;
//! - [`builder`]: the answer's parsed text ([`crate::output::assistant_output::OutputEvent`]s) as output
//!   items and stream events, one path for the streamed and the complete response.

pub mod builder;
pub mod events;
pub mod input;
pub mod object;
pub mod request;
pub mod tools;

/// A fresh item or response id: `prefix` and 24 random letters and digits (as OpenAI's).
pub fn new_id(prefix: &str) -> String {
    use rand::distr::{Alphanumeric, SampleString};
    format!(
        "{prefix}_{}",
        Alphanumeric.sample_string(&mut rand::rng(), 24)
    )
}
