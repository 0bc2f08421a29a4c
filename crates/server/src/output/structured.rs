//! Structured outputs: the request's grammar (`openai::structured`) compiled with llguidance
//! into the engine's token constraint, before the request reaches the engine.

mod compiler;
mod lru;
mod matcher_constraint;

pub(crate) use compiler::json_layout;
pub use compiler::Grammars;

use ferrite_engine::Constraint;

use crate::error::ApiError;
use crate::openai::structured::StructuredFields;

/// The constraint the request's fields ask for, if any (compiled, or from the cache).
pub async fn requested_constraint(
    grammars: &Grammars,
    fields: &StructuredFields,
) -> Result<Option<Constraint>, ApiError> {
    match fields.grammar()? {
        Some(grammar) => grammars.constraint(grammar).await.map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests;
