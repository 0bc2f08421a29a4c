//! Generation requests from the routes' side: a chat turn as every chat-shaped API asks for it,
//! and the engine requests a prompt becomes, followed until they finish (aborted when dropped).

pub mod chat_turn;
pub mod submission;
