//! The engine as the rest of ferrite sees it: a handle to the scheduler thread.
//!
//! The signatures here are the contract between the engine and the server.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use thiserror::Error;

use crate::backend::Backend;
use crate::engine_loop::{self, EngineCommand, EngineCore};
use crate::kv::KvManager;
use crate::request::{EngineStep, GenerationRequest, RequestId};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::spec::{Proposer, Speculation};

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
    /// While sequences decode, prompt tokens per step at most this many per decoding sequence
    /// (at least `MIN_PREFILL_CHUNK`); 0 = only the step budget limits them.
    pub prefill_per_decode: usize,
    pub enable_prefix_caching: bool,
    /// Longest prompt + output; `None`: the model's trained context, capped by what the pool holds.
    pub max_model_len: Option<usize>,
    /// Tokens that end a generation unless `ignore_eos`.
    pub eos_token_ids: Vec<u32>,
    /// Speculative decoding, when a proposer is given to [`spawn_engine`].
    pub speculation: SpecOptions,
}

/// How speculative decoding runs (when there is a proposer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecOptions {
    /// Drafts per sequence and step, at most (1..=[`MAX_SPEC_TOKENS`]).
    pub num_tokens: usize,
    /// Choose k each step by measured cost (0 = plain decoding); else always `num_tokens`.
    pub adaptive: bool,
    /// Decode plainly in steps where more than this many sequences are decoding (vLLM's
    /// `speculative_disable_by_batch_size`); `None`: no limit.
    pub disable_by_batch_size: Option<usize>,
}

impl Default for SpecOptions {
    fn default() -> Self {
        Self {
            num_tokens: 4,
            adaptive: true,
            disable_by_batch_size: None,
        }
    }
}

/// The most drafts per step the engine accepts (and reports per position).
pub const MAX_SPEC_TOKENS: usize = 16;

/// Speculative-decoding totals, as the scheduler thread last published them.
#[derive(Debug, Default)]
pub struct SpecStats {
    pub enabled: AtomicBool,
    pub num_drafts: AtomicU64,
    pub num_draft_tokens: AtomicU64,
    pub num_accepted_tokens: AtomicU64,
    /// Entry `i`: rounds whose draft at position `i` was accepted.
    pub num_accepted_tokens_per_pos: [AtomicU64; MAX_SPEC_TOKENS],
    /// Drafts per step at most (positions past it are always 0).
    pub num_tokens: AtomicUsize,
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
    pub speculation: SpecStats,
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
    commands: Sender<EngineCommand>,
    /// The scheduler thread, joined by the last handle's `shutdown`.
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
    stats: Arc<EngineStats>,
    max_model_len: usize,
    page_size: usize,
    num_pages: usize,
    enable_prefix_caching: bool,
}

impl EngineHandle {
    /// Queue a request. Its outputs arrive on the `outputs` channel given to [`spawn_engine`].
    pub fn add_request(&self, request: GenerationRequest) -> Result<(), EngineError> {
        self.commands
            .send(EngineCommand::Add(request))
            .map_err(|_| EngineError::Stopped)
    }
    /// Stop a request (client gone, stop string matched); its pages are freed within one step.
    /// Unknown or finished ids are ignored.
    pub fn abort(&self, id: RequestId) {
        // A stopped engine has nothing left to abort.
        let _ = self.commands.send(EngineCommand::Abort(id));
    }
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }
    /// The same numbers, for a reader that must own them (a metrics collector).
    pub fn shared_stats(&self) -> Arc<EngineStats> {
        Arc::clone(&self.stats)
    }
    /// The effective context limit (prompt + output).
    pub fn max_model_len(&self) -> usize {
        self.max_model_len
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn num_pages(&self) -> usize {
        self.num_pages
    }
    pub fn enable_prefix_caching(&self) -> bool {
        self.enable_prefix_caching
    }
    /// Stops the engine and waits for its thread to finish, so that the backend (a GPU
    /// context with it) is torn down before the process exits rather than during its exit.
    /// Only the last handle waits: while clones are alive the engine keeps running for them.
    pub fn shutdown(self) {
        let thread = Arc::clone(&self.thread);
        drop(self);
        if Arc::strong_count(&thread) == 1 {
            let joinable = thread.lock().ok().and_then(|mut t| t.take());
            if let Some(joinable) = joinable {
                let _ = joinable.join();
            }
        }
    }
}

/// Pool size and context limit that `config` and `backend` allow: `(num_pages, max_model_len)`.
/// `draft_kv_bytes_per_token`: what a speculative proposer keeps per token in its own cache.
pub fn size_kv_pool(
    config: &EngineConfig,
    backend: &dyn Backend,
    draft_kv_bytes_per_token: usize,
) -> Result<(usize, usize), EngineError> {
    let invalid = |why: String| Err(EngineError::Config(why));
    if config.page_size == 0 || config.max_num_seqs == 0 || config.max_num_batched_tokens == 0 {
        return invalid("page_size, max_num_seqs and max_num_batched_tokens must be >= 1".into());
    }
    let bytes_per_token = backend.kv_bytes_per_token() + draft_kv_bytes_per_token;
    if bytes_per_token == 0 {
        return invalid("the backend reports 0 KV bytes per token".into());
    }
    let bytes_per_page = config.page_size.saturating_mul(bytes_per_token);
    let num_pages = (config.kv_cache_memory_bytes / bytes_per_page).min(u32::MAX as usize);
    if num_pages == 0 {
        return invalid(format!(
            "KV cache memory {} B holds no page of {} tokens ({bytes_per_page} B)",
            config.kv_cache_memory_bytes, config.page_size
        ));
    }
    let pool_tokens = num_pages * config.page_size;
    let max_model_len = match config.max_model_len {
        Some(asked) if asked > pool_tokens => {
            return invalid(format!(
                "max_model_len {asked} exceeds the {pool_tokens} tokens the KV cache holds; \
                 give it more memory or lower max_model_len"
            ))
        }
        Some(0) => return invalid("max_model_len must be >= 1".into()),
        Some(asked) => asked,
        None => backend.max_context_len().min(pool_tokens),
    };
    if max_model_len < 2 {
        return invalid(format!(
            "max_model_len {max_model_len} leaves no room to generate"
        ));
    }
    Ok((num_pages, max_model_len))
}

/// Start the scheduler thread. Each step's outputs and stats are sent as one [`EngineStep`]
/// on `outputs` (to the detokenizer thread).
/// `proposer`: decode speculatively with it, as `config.speculation` says.
pub fn spawn_engine(
    config: EngineConfig,
    backend: Box<dyn Backend>,
    proposer: Option<Box<dyn Proposer>>,
    outputs: Sender<EngineStep>,
) -> Result<EngineHandle, EngineError> {
    let stats = Arc::new(EngineStats::default());
    let core = build_engine_core(&config, backend, proposer, Arc::clone(&stats))?;
    let (max_model_len, num_pages) = (core.max_model_len(), core.scheduler().kv().num_pages());
    let (commands, receiver) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("ferrite-scheduler".into())
        .spawn(move || engine_loop::run(core, receiver, outputs))
        .map_err(|e| EngineError::Config(format!("cannot start the scheduler thread: {e}")))?;
    tracing::info!(
        num_pages,
        page_size = config.page_size,
        max_model_len,
        "engine started"
    );
    Ok(EngineHandle {
        commands,
        thread: Arc::new(Mutex::new(Some(thread))),
        stats,
        max_model_len,
        page_size: config.page_size,
        num_pages,
        enable_prefix_caching: config.enable_prefix_caching,
    })
}

/// The engine without its thread, sized and initialised exactly as [`spawn_engine`] does it:
/// for tests and benchmarks that want to drive steps themselves ([`EngineCore::step`]).
pub fn build_engine_core(
    config: &EngineConfig,
    mut backend: Box<dyn Backend>,
    proposer: Option<Box<dyn Proposer>>,
    stats: Arc<EngineStats>,
) -> Result<EngineCore, EngineError> {
    let spec = config.speculation;
    if proposer.is_some() && !(1..=MAX_SPEC_TOKENS).contains(&spec.num_tokens) {
        return Err(EngineError::Config(format!(
            "num_speculative_tokens must be in 1..={MAX_SPEC_TOKENS}, got {}",
            spec.num_tokens
        )));
    }
    let draft_bytes = proposer.as_ref().map_or(0, |p| p.kv_bytes_per_token());
    let (num_pages, max_model_len) = size_kv_pool(config, backend.as_ref(), draft_bytes)?;
    backend.init_kv_cache(num_pages, config.page_size)?;
    let speculation = match proposer {
        Some(mut proposer) => {
            proposer.init_kv_cache(num_pages, config.page_size)?;
            let mut speculation = Speculation::new(proposer, spec.num_tokens, spec.adaptive);
            speculation.disable_by_batch_size = spec.disable_by_batch_size;
            Some(speculation)
        }
        None => None,
    };
    let scheduler = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: config.max_num_batched_tokens,
            max_num_seqs: config.max_num_seqs,
            prefill_per_decode: config.prefill_per_decode,
        },
        KvManager::new(num_pages, config.page_size, config.enable_prefix_caching),
    );
    let mut core = EngineCore::new(
        scheduler,
        backend,
        config.eos_token_ids.clone(),
        max_model_len,
        stats,
    );
    if let Some(speculation) = speculation {
        core.set_speculation(speculation);
    }
    Ok(core)
}

#[cfg(test)]
#[path = "handle_tests.rs"]
mod tests;
