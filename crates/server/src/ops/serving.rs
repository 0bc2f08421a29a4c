//! `ferrite serve`'s life over HTTP: listen at once, load the model behind it, serve, and on
//! SIGTERM or Ctrl-C drain.
//!
//! The listener is bound before the model loads, so probes and clients get an answer (503
//! with `Retry-After`, `/ready` false) instead of a refused connection. On the signal the
//! server drains: `/ready` turns false, new API requests get 503 with `Retry-After`, requests
//! already running finish; then the process exits. `--shutdown-timeout` bounds the wait: the
//! requests still running then are aborted (their answers end with finish_reason `abort`)
//! and the server closes.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use ferrite_engine::{EngineHandle, EngineStep};
use tower::ServiceExt;

use crate::app::config::ServerConfig;
use crate::app::pipeline::start_pipeline;
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::observe::kv_events::{self, KvEventsConfig};
use crate::observe::metrics::Metrics;
use crate::observe::traces::{self, Tracer};
use crate::ops::lifecycle::{Lifecycle, Phase, RETRY_AFTER_DRAINING, RETRY_AFTER_LOADING};
use crate::ops::readiness;
use crate::ops::scale_out::{spawn_monitor, ScaleOutConfig};
use crate::routes::{request_id, router};
use crate::text::tokenizer_pool::TextModel;

/// How the HTTP side lives, besides what [`ServerConfig`] says about answering.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub host: String,
    pub port: u16,
    /// How long a drain may take before the remaining requests are aborted.
    pub shutdown_timeout: Duration,
    pub scale_out: ScaleOutConfig,
    /// The scale-out signal also turns `/ready` false.
    pub unready_on_scale_out: bool,
    /// Publish KV-cache events (`--kv-events-config`).
    pub kv_events: Option<KvEventsConfig>,
    /// Export a span per request over OTLP/HTTP (`--otlp-traces-endpoint`).
    pub otlp_traces_endpoint: Option<String>,
    /// A log line for each request refused while loading or draining (off with
    /// `--disable-log-requests`).
    pub log_requests: bool,
}

/// What loading the model produces: everything [`start_pipeline`] needs.
pub struct Loaded {
    pub config: ServerConfig,
    pub model: TextModel,
    pub engine: EngineHandle,
    pub outputs: Receiver<EngineStep>,
}

/// After the aborts of a timed-out drain, how long their last deltas get to reach clients.
const ABORT_GRACE: Duration = Duration::from_secs(2);
/// How long open connections get to close once the drain is over.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
const DRAIN_POLL: Duration = Duration::from_millis(50);

#[derive(Clone)]
struct Outer {
    lifecycle: Arc<Lifecycle>,
    app: Arc<OnceLock<App>>,
    log_requests: bool,
}

/// What exists once the model is loaded.
struct App {
    router: Router,
    tracer: Option<Arc<Tracer>>,
    /// Counts the requests refused here, before the router's middleware sees them.
    metrics: Arc<Metrics>,
}

/// Binds, loads the model with `load` (on a thread of its own), serves, and drains on
/// SIGTERM / Ctrl-C.
pub async fn serve<L>(options: ServeOptions, load: L) -> anyhow::Result<()>
where
    L: FnOnce() -> anyhow::Result<Loaded> + Send + 'static,
{
    let addr: SocketAddr = format!("{}:{}", options.host, options.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!("listening on http://{local}; loading the model");
    let lifecycle = Arc::new(Lifecycle::new(options.unready_on_scale_out));
    let outer = Outer {
        lifecycle: Arc::clone(&lifecycle),
        app: Arc::new(OnceLock::new()),
        log_requests: options.log_requests,
    };
    let app = Arc::clone(&outer.app);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, outer_router(outer))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();
    // A plain thread: the runtime must not wait for it if a signal ends the process first.
    std::thread::Builder::new()
        .name("ferrite-loader".into())
        .spawn(move || {
            let _ = loaded_tx.send(load());
        })?;
    let mut signal = std::pin::pin!(shutdown_signal());
    let state = tokio::select! {
        loaded = loaded_rx => {
            let loaded = loaded.map_err(|_| anyhow::anyhow!("the model loader died"))??;
            start(&options, loaded, &lifecycle, &app, local)?
        }
        _ = &mut signal => {
            tracing::info!("shutdown signal while loading: exiting");
            let _ = stop.send(());
            return Ok(());
        }
    };
    signal.await;
    drain(&lifecycle, &state, options.shutdown_timeout).await;
    let _ = stop.send(());
    match tokio::time::timeout(CLOSE_GRACE, server).await {
        Ok(Ok(result)) => result?,
        Ok(Err(join)) => tracing::error!(%join, "the HTTP server task failed"),
        Err(_) => tracing::warn!("connections still open after the drain; closing them"),
    }
    tracing::info!("shut down");
    Ok(())
}

fn start(
    options: &ServeOptions,
    loaded: Loaded,
    lifecycle: &Lifecycle,
    app: &OnceLock<App>,
    local: SocketAddr,
) -> anyhow::Result<Arc<AppState>> {
    let mut loaded = loaded;
    if let Some(endpoint) = &options.otlp_traces_endpoint {
        let tracer = traces::start(endpoint, loaded.config.served_model_name.clone())?;
        tracing::info!(endpoint, "exporting a span per request (OTLP/HTTP JSON)");
        loaded.config.tracer = Some(tracer);
    }
    if let Some(config) = options.kv_events.clone() {
        if !loaded.engine.enable_prefix_caching() {
            tracing::warn!(
                "KV-cache events on without prefix caching: no block is ever cached, none reported"
            );
        }
        tracing::info!(endpoint = %config.endpoint, topic = %config.topic, "publishing KV-cache events");
        // Before any request: the engine receives the sink ahead of every block.
        loaded
            .engine
            .set_kv_event_sink(Box::new(kv_events::start(config)?))?;
    }
    let state = start_pipeline(&loaded.config, &loaded.model, loaded.engine, loaded.outputs)?;
    let _ = app.set(App {
        router: router(Arc::clone(&state)),
        tracer: loaded.config.tracer.clone(),
        metrics: Arc::clone(&state.metrics),
    });
    let signal = state.metrics.scale_out_signal();
    spawn_monitor(
        options.scale_out,
        state.engine.shared_stats(),
        Arc::clone(&signal),
    );
    lifecycle.mark_ready(signal);
    tracing::info!(
        "serving {} on http://{local}",
        loaded.config.served_model_name
    );
    Ok(state)
}

fn outer_router(outer: Outer) -> Router {
    let probes = Router::new()
        .route("/health", get(readiness::health))
        .route("/ready", get(readiness::ready))
        .with_state(Arc::clone(&outer.lifecycle));
    probes.fallback(dispatch).with_state(outer)
}

/// Everything but the probes: to the API while ready, refused while loading or draining
/// (except /metrics, which is served as long as the model is loaded).
async fn dispatch(State(outer): State<Outer>, request: Request) -> Response {
    let Some(app) = outer.app.get() else {
        return refused(&outer, None, &request, refuse_loading());
    };
    if request.uri().path() == "/metrics" {
        return forward(app, request).await;
    }
    // Counted before the phase is read, so that a drain never misses a request it let in.
    let _in_flight = outer.lifecycle.enter();
    match outer.lifecycle.phase() {
        Phase::Ready => forward(app, request).await,
        // The app is built a moment before the phase turns ready: still loading, not draining.
        Phase::Loading => refused(&outer, Some(app), &request, refuse_loading()),
        Phase::Draining => {
            let answer = refuse(
                "the server is shutting down; retry on another replica",
                RETRY_AFTER_DRAINING,
            );
            refused(&outer, Some(app), &request, answer)
        }
    }
}

/// A refusal made here, outside the router: given the request's id, logged and counted as the
/// router's middleware does for its own.
fn refused(outer: &Outer, app: Option<&App>, request: &Request, response: Response) -> Response {
    request_id::outside_router(
        request,
        response,
        app.map(|a| a.metrics.as_ref()),
        outer.log_requests,
    )
}

async fn forward(app: &App, request: Request) -> Response {
    let result = match &app.tracer {
        Some(tracer) => {
            let headers = request.headers().clone();
            let call = app.router.clone().oneshot(request);
            traces::scope(Some(tracer), &headers, call).await
        }
        None => app.router.clone().oneshot(request).await,
    };
    match result {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn refuse_loading() -> Response {
    refuse("the model is loading; retry shortly", RETRY_AFTER_LOADING)
}

fn refuse(message: &str, retry_after: Duration) -> Response {
    let error = ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: message.into(),
        kind: "server_error",
        param: None,
        code: Some("service_unavailable"),
    };
    let seconds = HeaderValue::from(retry_after.as_secs());
    ([(header::RETRY_AFTER, seconds)], error).into_response()
}

/// Waits for the requests that were let in to finish, at most `timeout`; aborts the rest.
async fn drain(lifecycle: &Lifecycle, state: &AppState, timeout: Duration) {
    lifecycle.begin_drain();
    tracing::info!(
        in_flight = lifecycle.in_flight(),
        engine_requests = state.registry.len(),
        timeout_s = timeout.as_secs_f64(),
        "shutdown signal: draining (new requests get 503; Ctrl-C again stops at once)"
    );
    let deadline = Instant::now() + timeout;
    let idle = || lifecycle.in_flight() == 0 && state.registry.is_empty();
    // A second Ctrl-C (SIGINT) cuts the drain short: the running requests are aborted now, as
    // at the timeout, instead of an operator waiting out --shutdown-timeout.
    let second_interrupt = tokio::signal::ctrl_c();
    tokio::pin!(second_interrupt);
    let mut interrupted = false;
    while !idle() && Instant::now() < deadline {
        tokio::select! {
            _ = tokio::time::sleep(DRAIN_POLL) => {}
            _ = &mut second_interrupt => {
                interrupted = true;
                break;
            }
        }
    }
    if idle() {
        tracing::info!("drained: every request finished");
        return;
    }
    let ids = state.registry.live_ids();
    if interrupted {
        tracing::warn!(
            aborted = ids.len(),
            "second Ctrl-C: aborting the requests still running (finish_reason \"abort\")"
        );
    } else {
        tracing::warn!(
            aborted = ids.len(),
            "shutdown timeout: aborting the requests still running (finish_reason \"abort\")"
        );
    }
    for id in ids {
        state.engine.abort(id);
    }
    let grace = Instant::now() + ABORT_GRACE;
    while !state.registry.is_empty() && Instant::now() < grace {
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
