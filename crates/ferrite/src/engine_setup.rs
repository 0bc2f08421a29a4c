//! Building the backend and the engine from the command-line flags.

use std::sync::mpsc::{channel, Receiver};

use ferrite_cpu::CpuBackend;
use ferrite_engine::{spawn_engine, Backend, EngineConfig, EngineHandle, EngineStep};

use crate::cli::EngineArgs;
use crate::model_source::LoadedModel;

pub struct RunningEngine {
    pub handle: EngineHandle,
    pub outputs: Receiver<EngineStep>,
    pub vocab_size: usize,
}

/// Consumes the weights: they move into the backend, which moves into the scheduler thread.
pub fn start_engine(model: &mut LoadedModel, args: &EngineArgs) -> anyhow::Result<RunningEngine> {
    let threads = args.threads.unwrap_or(0);
    let weights = std::mem::take(&mut model.weights);
    let backend = CpuBackend::new(model.config.clone(), weights, threads)?;
    let vocab_size = backend.vocab_size();
    let config = EngineConfig {
        page_size: args.page_size,
        kv_cache_memory_bytes: args.kv_cache_memory,
        max_num_batched_tokens: args.max_num_batched_tokens,
        max_num_seqs: args.max_num_seqs,
        enable_prefix_caching: !args.no_prefix_caching,
        max_model_len: args.max_model_len,
        eos_token_ids: model.tokenizer.eos_token_ids.clone(),
    };
    let (tx, outputs) = channel();
    let handle = spawn_engine(config, Box::new(backend), tx)?;
    Ok(RunningEngine {
        handle,
        outputs,
        vocab_size,
    })
}
