//! ferrite's engine: request state, the scheduler thread, the paged KV cache with its radix
//! prefix cache, and sampling. It knows token ids and page ids, never tensors: the forward pass
//! sits behind [`backend::Backend`].

pub mod backend;
pub mod request;

pub use backend::{Backend, BackendError, ForwardOutput, LogitsRequest, SeqBatch};
pub use request::{
    EngineOutput, FinishReason, GenerationRequest, PromptInfo, RequestId, SamplingParams,
    TokenLogprob,
};
pub mod handle;
pub use handle::{spawn_engine, EngineConfig, EngineError, EngineHandle, EngineStats};
