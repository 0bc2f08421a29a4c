//! What the engine's handle and setup can fail with.

use thiserror::Error;

use crate::backend::BackendError;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("the engine has stopped")]
    Stopped,
    #[error("invalid engine configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}
