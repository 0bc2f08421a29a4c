//! ferrite's serving side: the OpenAI-compatible HTTP API (axum), the tokenizer worker pool
//! with chat templates, the detokenizer thread, and Prometheus metrics.
//!
//! Threads: tokio runs HTTP; tokenizer workers render and tokenize; the engine's scheduler
//! thread runs the model; the detokenizer thread turns its outputs into text for the requests.
//!
//! Folders by role: `text` (tokenizing, templates, detokenizing), `output` (constraints on the
//! assistant's output and how it is read), `observe` (metrics, logs, traces, KV events),
//! `app` (configuration, shared state, the threads around the engine), `ops` (running the
//! process), `generation` (engine requests from the routes' side), the wire formats (`openai`,
//! `anthropic`, `responses`) and `routes` (the HTTP handlers).

mod anthropic;
pub mod app;
pub mod error;
mod generation;
mod json_body;
mod llama_server;
pub mod observe;
pub mod openai;
pub mod ops;
pub mod output;
pub mod responses;
mod routes;
#[cfg(test)]
mod testing;
pub mod text;

// The module paths the `ferrite` binary imports.
pub use observe::kv_events;
pub use output::{reasoning, tool_calls};

pub use app::config::{CorsConfig, ParserChoice, ServerConfig};
pub use app::pipeline::start_pipeline;
pub use app::response_store::StoreLimits;
pub use app::state::AppState;
pub use error::ApiError;
pub use observe::metrics::{MetricNames, Metrics, MetricsConfig};
pub use observe::request_log::RequestLogConfig;
pub use openai::sampling::SamplingDefaults;
pub use ops::scale_out::ScaleOutConfig;
pub use ops::serving::{serve, Loaded, ServeOptions};
pub use routes::router;
pub use text::chat_template::{ChatTemplate, TemplateError};
pub use text::detokenizer::{spawn_detokenizer, Registry};
pub use text::harmony_render::{ChatRenderer, HarmonySystem};
pub use text::incremental::IncrementalDecoder;
pub use text::stop_strings::{StopCheck, StopMatcher};
pub use text::tokenizer_pool::{ChatPrompt, TextModel, TokenizerPool};
