//! What the handlers run on: the server's configuration, the state every handler shares, and
//! the threads started around a running engine (tokenizer workers, detokenizer) that fill it,
//! and the stored responses of `/v1/responses`.

pub mod config;
pub(crate) mod pipeline;
pub mod response_store;
pub mod state;
