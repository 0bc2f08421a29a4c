//! The engine as the rest of ferrite sees it: a handle to the scheduler thread.
//!
//! The signatures here are the contract between the engine and the server.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::backend::Backend;
use crate::config::{EngineConfig, SchedulingPolicy};
use crate::engine_loop::{self, EngineCommand};
use crate::error::EngineError;
use crate::kv::KvEventSink;
use crate::request::{EngineStep, GenerationRequest, RequestId};
use crate::setup::build_engine_core;
use crate::speculative::Proposer;
use crate::stats::{EngineStats, ExpertLoad};

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
    scheduling_policy: SchedulingPolicy,
    /// The backend's per-expert token counts, for a mixture-of-experts model.
    expert_load: Option<Arc<ExpertLoad>>,
}

impl EngineHandle {
    /// Queue a request. Its outputs arrive on the `outputs` channel given to [`spawn_engine`].
    pub fn add_request(&self, request: GenerationRequest) -> Result<(), EngineError> {
        self.commands
            .send(EngineCommand::Add(Box::new(request)))
            .map_err(|_| EngineError::Stopped)
    }
    /// Stop a request (client gone, stop string matched); its pages are freed within one step.
    /// Unknown or finished ids are ignored.
    pub fn abort(&self, id: RequestId) {
        // A stopped engine has nothing left to abort.
        let _ = self.commands.send(EngineCommand::Abort(id));
    }
    /// Report the prefix cache's stored and evicted blocks to `sink` (KV-cache events). Sent
    /// like a request, so that it takes effect before any request sent after it.
    pub fn set_kv_event_sink(&self, sink: Box<dyn KvEventSink>) -> Result<(), EngineError> {
        self.commands
            .send(EngineCommand::SetKvEventSink(sink))
            .map_err(|_| EngineError::Stopped)
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
    pub fn scheduling_policy(&self) -> SchedulingPolicy {
        self.scheduling_policy
    }
    /// Tokens routed to each expert since load; `None` for a model without experts.
    pub fn expert_load(&self) -> Option<Arc<ExpertLoad>> {
        self.expert_load.clone()
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
    let expert_load = backend.expert_load_counters();
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
        scheduling_policy: config.scheduling_policy,
        expert_load,
    })
}

#[cfg(test)]
mod tests;
