//! Structured outputs: the request's grammar (`openai::structured`) compiled with llguidance
//! into the engine's token constraint, before the request reaches the engine (compiled by
//! `generation::submit` while the prompt is prepared).

mod compiler;
mod lru;
mod matcher_constraint;

pub(crate) use compiler::json_layout;
pub use compiler::Grammars;

#[cfg(test)]
mod tests;
