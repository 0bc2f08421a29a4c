//! Generation requests from the routes' side: the one submission path every route takes
//! ([`submit`]), a chat turn as every chat-shaped API asks for it, and the engine requests a
//! prompt becomes, followed until they finish (aborted when dropped).

pub mod beam_search;
pub mod best_of;
pub mod chat_turn;
pub mod logit_rules;
pub mod reasoning_effort;
pub mod submission;
pub mod submit;
pub mod template_level;
mod usage_counter;
pub mod verbosity;
