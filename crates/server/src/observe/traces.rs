//! OpenTelemetry traces (`--otlp-traces-endpoint`): one span per engine request (one per
//! choice), named `llm_request` with the `gen_ai.*` attributes vLLM sets, exported over
//! OTLP/HTTP with JSON encoding (no protobuf, no gRPC) by a thread of its own.
//!
//! A request's `traceparent` header (W3C Trace Context) makes its span a child of the
//! caller's; without one the span starts a new trace. A caller that sends an unsampled
//! `traceparent` (flags 00) gets no span, as OpenTelemetry's parent-based sampler decides.
//!
//! The header is read where requests enter ([`scope`], a task-local around the handler), the
//! request's parameters where it is submitted ([`on_submit`]), and its timings when the
//! request tracker reports it finished ([`Tracer::on_finished`]): neither the scheduler
//! thread nor the handlers wait on the exporter.

mod context;
mod export;
mod otlp;

use std::collections::HashMap;
use std::future::Future;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use ferrite_engine::{RequestId, SamplingParams};

use crate::observe::finished_request::{reason_label, FinishedRequest};
pub use context::TraceParent;
use otlp::{KeyValue, Span, SPAN_KIND_SERVER};

/// What a request's span needs from its submission.
#[derive(Debug, Clone)]
struct Pending {
    parent: Option<TraceParent>,
    start: SystemTime,
    temperature: f32,
    top_p: f32,
    max_tokens: usize,
    n: usize,
}

pub struct Tracer {
    model: String,
    pending: Mutex<HashMap<RequestId, Pending>>,
    spans: Mutex<Sender<Span>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("model", &self.model)
            .finish()
    }
}

/// Starts the exporter thread; spans go to `endpoint` (OTLP/HTTP: `http://host:4318`, or the
/// full `.../v1/traces` URL), from service `$OTEL_SERVICE_NAME` (default `ferrite`).
pub fn start(endpoint: &str, model: String) -> anyhow::Result<Arc<Tracer>> {
    let url = export::traces_url(endpoint)?;
    // OpenTelemetry's variable, as every SDK honours it.
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "ferrite".into());
    let spans = export::spawn(url, service)?;
    Ok(Arc::new(Tracer {
        model,
        pending: Mutex::new(HashMap::new()),
        spans: Mutex::new(spans),
    }))
}

#[derive(Clone)]
struct Incoming {
    tracer: Arc<Tracer>,
    parent: Option<TraceParent>,
}

tokio::task_local! {
    static INCOMING: Incoming;
}

/// Runs a request's handler with its trace context (when tracing is on).
pub async fn scope<F: Future>(
    tracer: Option<&Arc<Tracer>>,
    headers: &HeaderMap,
    f: F,
) -> F::Output {
    let Some(tracer) = tracer else {
        return f.await;
    };
    let parent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse);
    let incoming = Incoming {
        tracer: Arc::clone(tracer),
        parent,
    };
    INCOMING.scope(incoming, f).await
}

/// Called for each engine request a handler submits: remembers what its span reports.
pub fn on_submit(id: RequestId, params: &SamplingParams, n: usize) {
    let _ = INCOMING.try_with(|incoming| {
        if incoming.parent.is_some_and(|p| !p.sampled) {
            return;
        }
        let pending = Pending {
            parent: incoming.parent,
            start: SystemTime::now(),
            temperature: params.temperature,
            top_p: params.top_p,
            max_tokens: params.max_tokens,
            n,
        };
        lock(&incoming.tracer.pending).insert(id, pending);
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn nanos(t: SystemTime) -> String {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}

impl Tracer {
    /// The request tracker saw `r` finish: its span goes to the exporter.
    pub fn on_finished(&self, r: &FinishedRequest) {
        let Some(p) = lock(&self.pending).remove(&r.id) else {
            return;
        };
        let span = self.span(r, &p);
        let _ = lock(&self.spans).send(span);
    }

    fn span(&self, r: &FinishedRequest, p: &Pending) -> Span {
        let seconds = |d: Duration| d.as_secs_f64();
        let mut attributes = vec![
            // The id the client saw (X-Request-Id), so a span is found from a log line.
            KeyValue::string(
                "gen_ai.request.id",
                r.request_id
                    .as_deref()
                    .map_or_else(|| r.id.to_string(), str::to_string),
            ),
            KeyValue::string("gen_ai.response.model", self.model.clone()),
            KeyValue::double("gen_ai.request.temperature", f64::from(p.temperature)),
            KeyValue::double("gen_ai.request.top_p", f64::from(p.top_p)),
            KeyValue::int("gen_ai.request.max_tokens", p.max_tokens as u64),
            KeyValue::int("gen_ai.request.n", p.n as u64),
            KeyValue::int("gen_ai.usage.prompt_tokens", r.num_prompt_tokens as u64),
            KeyValue::int(
                "gen_ai.usage.completion_tokens",
                r.num_generation_tokens as u64,
            ),
            KeyValue::int("gen_ai.usage.cached_tokens", r.num_cached_tokens as u64),
            KeyValue::strings("gen_ai.response.finish_reasons", &[reason_label(r.finish)]),
            KeyValue::double("gen_ai.latency.time_in_queue", seconds(r.queue)),
            KeyValue::double("gen_ai.latency.e2e", seconds(r.e2e)),
            KeyValue::double("gen_ai.latency.time_in_model_prefill", seconds(r.prefill)),
            KeyValue::double("gen_ai.latency.time_in_model_decode", seconds(r.decode)),
            KeyValue::double(
                "gen_ai.latency.time_in_model_inference",
                seconds(r.prefill + r.decode),
            ),
        ];
        if let Some(ttft) = r.time_to_first_token {
            attributes.push(KeyValue::double(
                "gen_ai.latency.time_to_first_token",
                seconds(ttft),
            ));
        }
        let (trace_id, parent_span_id) = match p.parent {
            Some(parent) => (parent.trace_id, context::hex(&parent.parent_span_id)),
            None => (context::new_trace_id(), String::new()),
        };
        Span {
            trace_id: context::hex(&trace_id),
            span_id: context::hex(&context::new_span_id()),
            parent_span_id,
            name: "llm_request",
            kind: SPAN_KIND_SERVER,
            start_time_unix_nano: nanos(p.start),
            end_time_unix_nano: nanos(p.start + r.e2e),
            attributes,
        }
    }
}
