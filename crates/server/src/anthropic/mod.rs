//! Anthropic's Messages API wire format (`POST /v1/messages`, `/v1/messages/count_tokens`):
//! the request and its translation into a [`crate::generation::chat_turn::ChatTurn`], the content blocks
//! of the answer (complete and streamed, both built from the same [`blocks::BlockBuilder`]),
//! stop sequences and the Anthropic error body. Only the wire format is Anthropic's: the turn
//! runs through the same template rendering, constraints and output parsing as OpenAI's chat.

pub mod blocks;
pub mod error;
pub mod request;
pub mod response;
pub mod stream;
pub mod translate;
pub mod turn_text;
