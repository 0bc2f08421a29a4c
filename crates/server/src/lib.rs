//! ferrite's serving side: the OpenAI-compatible HTTP API (axum), the tokenizer worker pool
//! with chat templates, the detokenizer thread, and Prometheus metrics.
//!
//! Threads: tokio runs HTTP; tokenizer workers render and tokenize; the engine's scheduler
//! thread runs the model; the detokenizer thread turns its outputs into text for the requests.

mod anthropic;
mod assistant_output;
mod auth;
pub mod chat_template;
mod chat_turn;
pub mod config;
pub mod detokenizer;
pub mod error;
pub mod finished_request;
mod generation;
pub mod incremental;
mod json_body;
pub mod kv_events;
pub mod lifecycle;
pub mod messages;
pub mod metrics;
pub mod openai;
mod pipeline;
mod readiness;
pub mod reasoning;
pub mod request_log;
pub mod request_tracker;
pub mod responses;
mod routes;
pub mod scale_out;
pub mod serving;
pub mod state;
pub mod stop_strings;
mod strftime;
mod structured;
#[cfg(test)]
mod testing;
pub mod token_text;
pub mod tokenizer_pool;
pub mod tool_calls;
pub mod traces;

pub use chat_template::{ChatTemplate, TemplateError};
pub use config::{ParserChoice, ServerConfig};
pub use detokenizer::{spawn_detokenizer, Registry};
pub use error::ApiError;
pub use incremental::IncrementalDecoder;
pub use metrics::{MetricNames, Metrics, MetricsConfig};
pub use openai::sampling::SamplingDefaults;
pub use pipeline::start_pipeline;
pub use request_log::RequestLogConfig;
pub use routes::router;
pub use scale_out::ScaleOutConfig;
pub use serving::{serve, Loaded, ServeOptions};
pub use state::AppState;
pub use stop_strings::{StopCheck, StopMatcher};
pub use tokenizer_pool::{ChatPrompt, TextModel, TokenizerPool};
