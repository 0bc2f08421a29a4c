//! Building the backend and the engine from the command-line flags.

use std::sync::mpsc::{channel, Receiver};

use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, CudaOptions, WeightSource};
use ferrite_engine::{spawn_engine, Backend, EngineConfig, EngineHandle, EngineOutput};

use crate::cli::{Device, EngineArgs};
use crate::model_source::LoadedModel;

/// The CPU default of `--kv-cache-memory`.
const CPU_KV_CACHE_BYTES: usize = 1 << 30;

pub struct RunningEngine {
    pub handle: EngineHandle,
    pub outputs: Receiver<Vec<EngineOutput>>,
    pub vocab_size: usize,
}

/// The backend `args` ask for, over `model`'s weights (consumed), and the KV cache bytes.
pub fn build_backend(
    model: &mut LoadedModel,
    args: &EngineArgs,
) -> anyhow::Result<(Box<dyn Backend>, usize)> {
    let weights = std::mem::take(&mut model.weights);
    match args.device {
        Device::Cpu => {
            let weights = match model.dummy_seed {
                Some(seed) => ferrite_model::dummy::generate(&model.config, seed),
                None => weights,
            };
            let threads = args.threads.unwrap_or(0);
            let backend = CpuBackend::new(model.config.clone(), weights, threads)?;
            let kv = args.kv_cache_memory.unwrap_or(CPU_KV_CACHE_BYTES);
            Ok((Box::new(backend), kv))
        }
        Device::Cuda => {
            let source = match model.dummy_seed {
                Some(seed) => WeightSource::Dummy { seed },
                None => WeightSource::Host(weights),
            };
            let options = CudaOptions {
                device: 0,
                max_num_seqs: args.max_num_seqs,
                max_num_batched_tokens: args.max_num_batched_tokens,
                enforce_eager: args.enforce_eager,
                cuda_graph_max_bs: args.cuda_graph_max_bs,
                gpu_memory_utilization: args.gpu_memory_utilization,
            };
            let backend = CudaBackend::new(model.config.clone(), source, options)?;
            let kv = match args.kv_cache_memory {
                Some(bytes) => bytes,
                None => backend.kv_cache_budget()?,
            };
            Ok((Box::new(backend), kv))
        }
    }
}

/// Consumes the weights: they move into the backend, which moves into the scheduler thread.
pub fn start_engine(model: &mut LoadedModel, args: &EngineArgs) -> anyhow::Result<RunningEngine> {
    let (backend, kv_cache_memory_bytes) = build_backend(model, args)?;
    let vocab_size = backend.vocab_size();
    let config = engine_config(model, args, kv_cache_memory_bytes);
    let (tx, outputs) = channel();
    let handle = spawn_engine(config, backend, tx)?;
    Ok(RunningEngine {
        handle,
        outputs,
        vocab_size,
    })
}

pub fn engine_config(
    model: &LoadedModel,
    args: &EngineArgs,
    kv_cache_memory_bytes: usize,
) -> EngineConfig {
    EngineConfig {
        page_size: args.page_size,
        kv_cache_memory_bytes,
        max_num_batched_tokens: args.max_num_batched_tokens,
        max_num_seqs: args.max_num_seqs,
        enable_prefix_caching: !args.no_prefix_caching,
        max_model_len: args.max_model_len,
        eos_token_ids: model.tokenizer.eos_token_ids.clone(),
    }
}
