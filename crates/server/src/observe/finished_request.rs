//! What is known about an engine request once it finished: the record the request tracker
//! hands to the metrics and to the request log (neither needs the other, nor the tracker).

use std::sync::Arc;
use std::time::Duration;

use ferrite_engine::{FinishReason, RequestId, SpecSummary};

/// Everything known about a request when it finished.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRequest {
    pub id: RequestId,
    /// The client's request id (`X-Request-Id` or the server's), when it came over HTTP.
    pub request_id: Option<Arc<str>>,
    /// `Stop` also for a stop string matched here (the engine saw an abort).
    pub finish: FinishReason,
    pub num_prompt_tokens: usize,
    pub num_cached_tokens: usize,
    pub num_generation_tokens: usize,
    pub queue: Duration,
    pub prefill: Duration,
    pub decode: Duration,
    /// `None` when no token was produced.
    pub time_to_first_token: Option<Duration>,
    pub e2e: Duration,
    /// Kept only when the request log asks for token ids or prompt text.
    pub prompt_ids: Option<Arc<Vec<u32>>>,
    /// Kept only when the request log asks for token ids.
    pub output_ids: Option<Vec<u32>>,
    /// How speculative decoding went, for a request that was decoded speculatively.
    pub speculation: Option<SpecSummary>,
}

/// vLLM's `finished_reason` label values.
pub fn reason_label(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Abort => "abort",
    }
}
