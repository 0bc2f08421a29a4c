//! The assistant's output, beyond plain text: what it must match (structured outputs compiled
//! into the engine's token constraint) and how it is read (reasoning apart from content, tool
//! calls in the model's own format). Shared by every chat-shaped API.

pub(crate) mod assistant_output;
pub mod harmony;
pub(crate) mod harmony_grammar;
pub mod reasoning;
pub(crate) mod structured;
pub mod tool_calls;
