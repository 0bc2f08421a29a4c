//! ferrite's engine: request state, the scheduler thread, the paged KV cache with its radix
//! prefix cache, sampling and speculative decoding. It knows token ids and page ids, never
//! tensors: the forward pass sits behind [`backend::Backend`].
//!
//! One step, in order: [`scheduler`] plans it, [`speculative`] attaches drafts (when on),
//! [`forward`] runs it on the backend, [`commit`] turns the result into tokens and outputs,
//! [`engine_loop`] is the thread around the step, [`handle`] what the server talks to.

mod admission;
pub mod backend;
pub mod commit;
pub mod config;
pub mod constraint;
pub mod distribution;
pub mod engine_loop;
pub mod error;
pub mod forward;
pub mod handle;
pub mod kv;
pub mod logit_rules;
pub mod request;
pub mod sampler;
pub mod scheduler;
pub mod sequence;
pub mod setup;
pub mod speculative;
pub mod stats;
pub mod token_pieces;

#[cfg(test)]
mod testing;

pub use backend::{
    validate_batch, Backend, BackendError, BatchLimits, DeviceSampling, ForwardOutput,
    HeadDraftStep, KvWindow, LogitsRequest, SampledOutput, SeqBatch, StateCopy,
};
pub use config::{EngineConfig, SchedulingPolicy, SpecOptions, StateCacheOptions, MAX_SPEC_TOKENS};
pub use constraint::{
    Constraint, ConstraintError, ConstraintFactory, ConstraintState, DeviceMask, TokenConstraint,
    TokenMask,
};
pub use engine_loop::EngineCore;
pub use error::EngineError;
pub use handle::{spawn_engine, EngineHandle};
pub use logit_rules::{LogitRules, ThinkingBudget};
pub use request::{
    EngineOutput, EngineStep, FinishReason, GenerationRequest, PromptInfo, RequestId,
    SamplingParams, TokenLogprob,
};
pub use setup::{build_engine_core, size_kv_pool};
pub use speculative::{
    DraftModel, HeadProposer, NgramConfig, NgramProposer, Proposer, SuffixConfig, SuffixProposer,
};
pub use stats::{
    EngineStats, ExpertLoad, SpecCounters, SpecStats, SpecSummary, StepCounters, StepStats,
};
