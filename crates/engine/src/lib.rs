//! ferrite's engine: request state, the scheduler thread, the paged KV cache with its radix
//! prefix cache, and sampling. It knows token ids and page ids, never tensors: the forward pass
//! sits behind [`backend::Backend`].

pub mod backend;
pub mod distribution;
pub mod engine_loop;
pub mod handle;
pub mod kv;
pub mod request;
pub mod sampler;
pub mod scheduler;
pub mod sequence;
pub mod spec;

#[cfg(test)]
mod device_sampling_tests;
#[cfg(test)]
mod engine_loop_tests;
#[cfg(test)]
mod engine_proptests;
#[cfg(test)]
mod fake_backend;
#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod step_stats_tests;
#[cfg(test)]
mod test_harness;

pub use backend::{
    validate_batch, Backend, BackendError, BatchLimits, DeviceSampling, ForwardOutput,
    LogitsRequest, SampledOutput, SeqBatch,
};
pub use engine_loop::EngineCore;
pub use handle::{
    build_engine_core, spawn_engine, EngineConfig, EngineError, EngineHandle, EngineStats,
    SpecOptions, SpecStats, MAX_SPEC_TOKENS,
};
pub use request::{
    EngineOutput, EngineStep, FinishReason, GenerationRequest, PromptInfo, RequestId,
    SamplingParams, SpecSummary, StepStats, TokenLogprob,
};
