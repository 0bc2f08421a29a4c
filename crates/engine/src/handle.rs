//! The engine as the rest of ferrite sees it: a handle to the scheduler thread.
//!
//! SKELETON written by the integrator: the signatures are the contract between the engine and
//! the server; the engine's owner fills in the bodies (and may add methods, not change these).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use thiserror::Error;

use crate::backend::Backend;
use crate::request::{EngineOutput, GenerationRequest, RequestId};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Tokens per KV page.
    pub page_size: usize,
    /// Bytes the KV pool may take; the number of pages follows from the backend's bytes per token.
    pub kv_cache_memory_bytes: usize,
    /// Per-step token budget shared by prefill chunks and decodes.
    pub max_num_batched_tokens: usize,
    /// Running sequences at most.
    pub max_num_seqs: usize,
    pub enable_prefix_caching: bool,
    /// Longest prompt + output; `None`: the model's trained context, capped by what the pool holds.
    pub max_model_len: Option<usize>,
    /// Tokens that end a generation unless `ignore_eos`.
    pub eos_token_ids: Vec<u32>,
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("the engine has stopped")]
    Stopped,
    #[error("invalid engine configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
}

/// Live numbers the scheduler publishes after every step (read by /metrics and admission).
#[derive(Debug, Default)]
pub struct EngineStats {
    pub num_running: AtomicUsize,
    pub num_waiting: AtomicUsize,
    pub kv_pages_total: AtomicUsize,
    /// Pages referenced by at least one live sequence (cached-but-unreferenced pages are free).
    pub kv_pages_used: AtomicUsize,
    pub prompt_tokens_total: AtomicU64,
    pub generation_tokens_total: AtomicU64,
    /// Prompt tokens looked up in the prefix cache, and those found there.
    pub prefix_cache_queries_total: AtomicU64,
    pub prefix_cache_hits_total: AtomicU64,
    pub num_preemptions_total: AtomicU64,
    pub steps_total: AtomicU64,
}

impl EngineStats {
    /// Fraction of KV pages in use, 0..=1.
    pub fn kv_cache_usage(&self) -> f64 {
        let total = self.kv_pages_total.load(Ordering::Relaxed);
        if total == 0 {
            0.0
        } else {
            self.kv_pages_used.load(Ordering::Relaxed) as f64 / total as f64
        }
    }
}

/// Cheap to clone; every clone talks to the same scheduler thread.
#[derive(Clone)]
pub struct EngineHandle {
    // fields are the engine owner's choice
    _private: Arc<()>,
}

impl EngineHandle {
    /// Queue a request. Its outputs arrive on the `outputs` channel given to [`spawn_engine`].
    pub fn add_request(&self, _request: GenerationRequest) -> Result<(), EngineError> {
        todo!()
    }
    /// Stop a request (client gone, stop string matched); its pages are freed within one step.
    /// Unknown or finished ids are ignored.
    pub fn abort(&self, _id: RequestId) {
        todo!()
    }
    pub fn stats(&self) -> &EngineStats {
        todo!()
    }
    /// The effective context limit (prompt + output).
    pub fn max_model_len(&self) -> usize {
        todo!()
    }
    pub fn page_size(&self) -> usize {
        todo!()
    }
    pub fn num_pages(&self) -> usize {
        todo!()
    }
}

/// Start the scheduler thread. Each step's outputs are sent as one `Vec` on `outputs`
/// (to the detokenizer thread).
pub fn spawn_engine(
    _config: EngineConfig,
    _backend: Box<dyn Backend>,
    _outputs: Sender<Vec<EngineOutput>>,
) -> Result<EngineHandle, EngineError> {
    todo!()
}
