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
pub mod metrics;
pub mod openai;
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

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use ferrite_engine::{EngineHandle, EngineStep};

pub use chat_template::{ChatTemplate, TemplateError};
pub use config::{ParserChoice, ServerConfig};
pub use detokenizer::{spawn_detokenizer, Registry};
pub use error::ApiError;
pub use incremental::IncrementalDecoder;
pub use metrics::{MetricNames, Metrics, MetricsConfig};
pub use openai::sampling::SamplingDefaults;
pub use request_log::RequestLogConfig;
use request_tracker::RequestTracker;
pub use scale_out::ScaleOutConfig;
pub use serving::{serve, Loaded, ServeOptions};
pub use state::AppState;
pub use stop_strings::{StopCheck, StopMatcher};
pub use tokenizer_pool::{ChatPrompt, TextModel, TokenizerPool};

/// Starts the tokenizer workers and the detokenizer thread around a running engine, and
/// returns the shared state; `outputs` is the receiving end given to `spawn_engine`.
pub fn start_pipeline(
    config: &ServerConfig,
    model: &TextModel,
    engine: EngineHandle,
    outputs: Receiver<EngineStep>,
) -> anyhow::Result<Arc<AppState>> {
    let tokenizers = TokenizerPool::new(model, config.tokenizer_workers)?;
    let registry = Registry::default();
    let metrics_config = MetricsConfig {
        names: config.metrics_names,
        model_name: config.served_model_name.clone(),
        max_model_len: engine.max_model_len(),
        page_size: engine.page_size(),
        num_pages: engine.num_pages(),
        enable_prefix_caching: engine.enable_prefix_caching(),
        expert_load: if config.expert_load_metrics {
            let load = engine.expert_load();
            if load.is_none() {
                tracing::warn!(
                    "--expert-load-metrics: the model has no mixture-of-experts layers (or its \
                     backend does not count them), so there is nothing to export"
                );
            }
            load
        } else {
            None
        },
    };
    let metrics = Arc::new(Metrics::new(&metrics_config, engine.shared_stats()));
    let aborter = engine.clone();
    spawn_detokenizer(
        model.tokenizer.clone(),
        registry.clone(),
        outputs,
        Box::new(move |id| aborter.abort(id)),
        RequestTracker::new(Arc::clone(&metrics), config.request_log)
            .with_tracer(config.tracer.clone()),
    )?;
    let state = AppState::new(
        engine,
        tokenizers,
        registry,
        metrics,
        config,
        model.chat_template.as_deref(),
        structured::Grammars::new(
            model.tokenizer.clone(),
            config.vocab_size,
            model.eos_token.clone(),
        ),
    );
    state.grammars.warm_up_in_background();
    tracing::info!(
        "tool-call parser: {}, reasoning parser: {}",
        state.tool_format.map_or("none", |f| f.name()),
        state.reasoning_format.map_or("none", |f| f.name()),
    );
    Ok(Arc::new(state))
}

pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/completions", post(routes::completions::completions))
        .route("/v1/chat/completions", post(routes::chat::chat_completions))
        .route("/v1/responses", post(routes::responses::create_response))
        .route("/v1/messages", post(routes::messages::create_message))
        .route(
            "/v1/messages/count_tokens",
            post(routes::messages::count_tokens),
        )
        .route("/v1/models", get(routes::info::models))
        .route("/tokenize", post(routes::info::tokenize))
        .route("/detokenize", post(routes::info::detokenize))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_api_key,
        ));
    Router::new()
        .merge(api)
        .route("/health", get(routes::info::health))
        .route("/metrics", get(routes::info::metrics))
        .fallback(routes::not_found)
        .with_state(state)
}
