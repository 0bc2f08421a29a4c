//! How the HTTP server is configured (the engine has its own `EngineConfig`).

use crate::app::response_store::StoreLimits;
use crate::observe::metrics::MetricNames;
use crate::observe::request_log::RequestLogConfig;
use crate::observe::traces::Tracer;
use crate::openai::sampling::SamplingDefaults;
use crate::output::reasoning::ReasoningFormat;
use crate::output::tool_calls::ToolCallFormat;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
    /// The name clients put in `model`; others get 404.
    pub served_model_name: String,
    pub api_key: Option<String>,
    pub max_waiting: usize,
    pub tokenizer_workers: usize,
    /// Token ids at or above this are refused (the backend's vocabulary size).
    pub vocab_size: usize,
    /// `ferrite:` or vLLM's `vllm:` names on /metrics.
    pub metrics_names: MetricNames,
    /// Export the tokens routed to each expert (`--expert-load-metrics`).
    pub expert_load_metrics: bool,
    /// What the per-request log line carries besides counts and times.
    pub request_log: RequestLogConfig,
    /// What requests get for the sampling fields they leave out (the model's
    /// generation_config.json where it has them).
    pub sampling_defaults: SamplingDefaults,
    /// How tool calls are read from the model's output (`--tool-call-parser`).
    pub tool_call_parser: ParserChoice<ToolCallFormat>,
    /// How reasoning is told from the answer (`--reasoning-parser`).
    pub reasoning_parser: ParserChoice<ReasoningFormat>,
    /// Where finished requests' spans go (`--otlp-traces-endpoint`).
    pub tracer: Option<Arc<Tracer>>,
    /// CORS (`--allowed-origins` and its siblings); `None`: off.
    pub cors: Option<CorsConfig>,
    /// Chat requests may carry their own template (`--trust-request-chat-template`).
    pub trust_request_chat_template: bool,
    /// The bounds of the stored responses (`--responses-store-capacity`, `-ttl`).
    pub responses_store: StoreLimits,
}

/// CORS as vLLM's flags set it; `routes::cors` answers with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsConfig {
    /// Origins allowed, `*` for any.
    pub origins: Vec<String>,
    /// Methods allowed, `*` for any.
    pub methods: Vec<String>,
    /// Request headers allowed, `*` for any.
    pub headers: Vec<String>,
    pub credentials: bool,
}

/// A parser named on the command line, or detected from the chat template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParserChoice<T> {
    /// From the chat template's text.
    #[default]
    Detect,
    Off,
    Use(T),
}

impl<T> ParserChoice<T> {
    pub fn resolve(self, detect: impl FnOnce() -> Option<T>) -> Option<T> {
        match self {
            Self::Detect => detect(),
            Self::Off => None,
            Self::Use(format) => Some(format),
        }
    }
}
