//! The threads around a running engine: the tokenizer workers and the detokenizer, and the
//! shared state the routes read.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use ferrite_engine::{EngineHandle, EngineStep};

use crate::app::config::ServerConfig;
use crate::app::state::AppState;
use crate::observe::metrics::{Metrics, MetricsConfig};
use crate::observe::request_names::RequestNames;
use crate::observe::request_tracker::RequestTracker;
use crate::output::structured;
use crate::text::detokenizer::{spawn_detokenizer, Registry};
use crate::text::tokenizer_pool::{TextModel, TokenizerPool};

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
    let names = RequestNames::default();
    spawn_detokenizer(
        model.tokenizer.clone(),
        registry.clone(),
        outputs,
        Box::new(move |id| aborter.abort(id)),
        RequestTracker::new(Arc::clone(&metrics), config.request_log)
            .with_tracer(config.tracer.clone())
            .with_names(names.clone()),
    )?;
    let mut state = AppState::new(
        engine,
        tokenizers,
        registry,
        metrics,
        config,
        model,
        structured::Grammars::new(
            model.tokenizer.clone(),
            config.vocab_size,
            model.eos_token.clone(),
        ),
    );
    state.request_names = names;
    state.grammars.warm_up_in_background();
    tracing::info!(
        "tool-call parser: {}, reasoning parser: {}",
        state.tool_format.map_or("none", |f| f.name()),
        state.reasoning_format.map_or("none", |f| f.name()),
    );
    Ok(Arc::new(state))
}
