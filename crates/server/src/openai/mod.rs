//! OpenAI API request types and response shapes.

pub mod chat;
pub mod common;
pub mod completions;
