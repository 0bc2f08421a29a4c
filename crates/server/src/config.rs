//! How the HTTP server is configured (the engine has its own `EngineConfig`).

use crate::metrics::MetricNames;
use crate::request_log::RequestLogConfig;

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
    /// What the per-request log line carries besides counts and times.
    pub request_log: RequestLogConfig,
}
