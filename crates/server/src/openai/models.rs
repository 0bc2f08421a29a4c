//! `GET /v1/models`: the one model this server serves.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    pub object: &'static str,
    pub data: Vec<ModelCard>,
}

impl ModelList {
    pub fn new(data: Vec<ModelCard>) -> Self {
        Self {
            object: "list",
            data,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelCard {
    pub id: String,
    pub object: &'static str,
    /// Unix seconds: when the server started.
    pub created: u64,
    pub owned_by: &'static str,
    /// vLLM's extension: the longest prompt + completion in tokens.
    pub max_model_len: usize,
}

impl ModelCard {
    pub fn new(id: String, created: u64, max_model_len: usize) -> Self {
        Self {
            id,
            object: "model",
            created,
            owned_by: "ferrite",
            max_model_len,
        }
    }
}
