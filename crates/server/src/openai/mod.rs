//! The OpenAI API's wire format: the requests ferrite reads and the responses it writes, as
//! types (serde), so that a route builds an answer rather than assembling JSON.

pub mod chat;
pub mod chunk;
pub mod completions;
pub mod legacy_functions;
pub mod logit_fields;
pub mod logprobs;
pub mod models;
pub mod prediction;
pub mod prompt_logprobs;
pub mod request_fields;
pub mod response;
pub mod sampling;
pub mod structured;
pub mod text_fields;
pub mod tokenize;
pub mod tools;
pub mod usage;
