//! `/metrics`: vLLM's Prometheus series, with vLLM's meaning, types and buckets, under the
//! `ferrite:` prefix (or vLLM's own `vllm:` names on request), labelled `model_name`; plus
//! `ferrite:scheduler_step_seconds`, which no other server exports.
//!
//! Gauges and counters the engine keeps as atomics are read at scrape time
//! ([`engine_collector`]); histograms and the per-reason request counter are fed by the
//! detokenizer thread (its request tracker) from the facts the engine reports, so the
//! scheduler thread never touches a metric.
//!
//! Counting unit: one engine request per choice (a request with `n` choices counts `n` times),
//! as vLLM counts each of the `n` child requests it fans out.

mod buckets;
mod engine_collector;
mod expert_load;
mod scale_out;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use ferrite_engine::{EngineStats, ExpertLoad, FinishReason, StepStats};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::observe::finished_request::{reason_label, FinishedRequest};
use engine_collector::EngineCollector;
use expert_load::ExpertLoadCollector;
use scale_out::ScaleOutCollector;
pub use scale_out::ScaleOutSignal;

/// The `Content-Type` of what [`Metrics::render`] returns.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Whose names the vLLM-defined series carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricNames {
    /// `ferrite:num_requests_waiting`, ...
    #[default]
    Ferrite,
    /// `vllm:num_requests_waiting`, ...: what existing vLLM dashboards and the Gateway API
    /// Inference Extension read. Series vLLM does not define keep their `ferrite:` name.
    Vllm,
}

impl MetricNames {
    pub fn prefix(self) -> &'static str {
        match self {
            MetricNames::Ferrite => "ferrite:",
            MetricNames::Vllm => "vllm:",
        }
    }
}

/// The ferrite-only series' prefix, whatever [`MetricNames`] says.
const OWN_PREFIX: &str = "ferrite:";

/// What the series are labelled and sized with.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    pub names: MetricNames,
    pub model_name: String,
    /// Upper end of the token-count histograms' 1-2-5 buckets.
    pub max_model_len: usize,
    /// `cache_config_info`'s labels.
    pub page_size: usize,
    pub num_pages: usize,
    pub enable_prefix_caching: bool,
    /// Export `ferrite:moe_expert_tokens_total` from these counters (`--expert-load-metrics`).
    pub expert_load: Option<Arc<ExpertLoad>>,
}

type Labels = [(&'static str, &'static str); 1];
/// `route` (a route's path, or `unmatched`: bounded) and `status` (the HTTP code).
type HttpLabels = [(&'static str, String); 2];

pub struct Metrics {
    registry: Registry,
    time_to_first_token: Histogram,
    inter_token_latency: Histogram,
    e2e_latency: Histogram,
    queue_time: Histogram,
    prefill_time: Histogram,
    decode_time: Histogram,
    inference_time: Histogram,
    prompt_tokens: Histogram,
    generation_tokens: Histogram,
    iteration_tokens: Histogram,
    /// Indexed by [`reason_index`].
    request_success: [Counter; 3],
    step_schedule: Histogram,
    step_draft: Histogram,
    step_forward: Histogram,
    step_sample: Histogram,
    scale_out: Arc<ScaleOutSignal>,
    http_requests: Family<HttpLabels, Counter>,
}

fn reason_index(reason: FinishReason) -> usize {
    match reason {
        FinishReason::Stop => 0,
        FinishReason::Length => 1,
        FinishReason::Abort => 2,
    }
}

fn histogram(bounds: &[f64]) -> Histogram {
    Histogram::new(bounds.iter().copied())
}

impl Metrics {
    pub fn new(config: &MetricsConfig, engine: Arc<EngineStats>) -> Self {
        let model_label = (
            Cow::Borrowed("model_name"),
            Cow::Owned(config.model_name.clone()),
        );
        let mut registry = Registry::with_labels(std::iter::once(model_label));
        let p = config.names.prefix();
        registry.register_collector(Box::new(EngineCollector::new(config, engine)));
        if let Some(load) = &config.expert_load {
            registry.register_collector(Box::new(ExpertLoadCollector(Arc::clone(load))));
        }
        let scale_out = Arc::new(ScaleOutSignal::default());
        registry.register_collector(Box::new(ScaleOutCollector(Arc::clone(&scale_out))));

        let token_counts = buckets::one_two_five(config.max_model_len);
        let mut add = |name: &str, help: &str, bounds: &[f64]| {
            let h = histogram(bounds);
            registry.register(format!("{p}{name}"), help, h.clone());
            h
        };
        let time_to_first_token = add(
            "time_to_first_token_seconds",
            "Histogram of time to first token in seconds: arrival to the step that sampled it",
            buckets::TIME_TO_FIRST_TOKEN,
        );
        let inter_token_latency = add(
            "inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds: the gap between consecutive output tokens of a request",
            buckets::INTER_TOKEN_LATENCY,
        );
        let e2e_latency = add(
            "e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds: arrival to finish",
            buckets::REQUEST_LATENCY,
        );
        let queue_time = add(
            "request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request: arrival to first scheduling",
            buckets::REQUEST_LATENCY,
        );
        let prefill_time = add(
            "request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request: first scheduling to first token",
            buckets::REQUEST_LATENCY,
        );
        let decode_time = add(
            "request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request: first token to last token",
            buckets::REQUEST_LATENCY,
        );
        let inference_time = add(
            "request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request: first scheduling to finish",
            buckets::REQUEST_LATENCY,
        );
        let prompt_tokens = add(
            "request_prompt_tokens",
            "Number of prefill tokens processed, per finished request",
            &token_counts,
        );
        let generation_tokens = add(
            "request_generation_tokens",
            "Number of generation tokens processed, per finished request",
            &token_counts,
        );
        let iteration_tokens = add(
            "iteration_tokens_total",
            "Histogram of number of tokens per engine_step: tokens the forward pass computed",
            buckets::ITERATION_TOKENS,
        );

        let success = Family::<Labels, Counter>::default();
        registry.register(
            format!("{p}request_success"),
            "Count of successfully processed requests, by finish reason; one per choice \
             (engine request); abort counts requests the client abandoned or a failure ended",
            success.clone(),
        );
        let request_success = [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::Abort,
        ]
        .map(|r| success.get_or_create_owned(&[("finished_reason", reason_label(r))]));

        let steps = Family::<Labels, Histogram>::new_with_constructor(|| {
            histogram(buckets::SCHEDULER_STEP)
        });
        registry.register(
            format!("{OWN_PREFIX}scheduler_step_seconds"),
            "Time of each engine step with a forward pass, by phase: schedule (planning and \
             batching, CPU), draft (speculative proposals, only with speculation), forward (the \
             model), sample (sampling, verification and bookkeeping, CPU)",
            steps.clone(),
        );
        let phase = |name: &'static str| steps.get_or_create_owned(&[("phase", name)]);

        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            format!("{OWN_PREFIX}http_requests"),
            "HTTP requests answered, by route and status code (rejections included; counted \
             when the response head is sent, so a stream counts at its start)",
            http_requests.clone(),
        );

        Self {
            time_to_first_token,
            inter_token_latency,
            e2e_latency,
            queue_time,
            prefill_time,
            decode_time,
            inference_time,
            prompt_tokens,
            generation_tokens,
            iteration_tokens,
            request_success,
            step_schedule: phase("schedule"),
            step_draft: phase("draft"),
            step_forward: phase("forward"),
            step_sample: phase("sample"),
            scale_out,
            http_requests,
            registry,
        }
    }

    /// Every series in the Prometheus text format (version 0.0.4, what vLLM serves).
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// What the scale-out monitor sets and `ferrite:scale_out_needed` reports.
    pub fn scale_out_signal(&self) -> Arc<ScaleOutSignal> {
        Arc::clone(&self.scale_out)
    }

    pub fn observe_step(&self, step: &StepStats) {
        self.iteration_tokens.observe(step.num_tokens as f64);
        self.step_schedule.observe(step.schedule.as_secs_f64());
        if !step.draft.is_zero() {
            self.step_draft.observe(step.draft.as_secs_f64());
        }
        self.step_forward.observe(step.forward.as_secs_f64());
        self.step_sample.observe(step.sample.as_secs_f64());
    }

    pub fn observe_first_token(&self, since_arrival: Duration) {
        self.time_to_first_token
            .observe(since_arrival.as_secs_f64());
    }

    pub fn observe_token_gap(&self, gap: Duration) {
        self.inter_token_latency.observe(gap.as_secs_f64());
    }

    /// One HTTP response; `route` must be one of a bounded set (a label per value).
    pub fn observe_http(&self, route: &'static str, status: u16) {
        self.http_requests
            .get_or_create(&[("route", route.to_string()), ("status", status.to_string())])
            .inc();
    }

    pub fn observe_finished(&self, r: &FinishedRequest) {
        self.request_success[reason_index(r.finish)].inc();
        self.e2e_latency.observe(r.e2e.as_secs_f64());
        self.queue_time.observe(r.queue.as_secs_f64());
        self.prefill_time.observe(r.prefill.as_secs_f64());
        self.decode_time.observe(r.decode.as_secs_f64());
        self.inference_time
            .observe((r.prefill + r.decode).as_secs_f64());
        self.prompt_tokens.observe(r.num_prompt_tokens as f64);
        self.generation_tokens
            .observe(r.num_generation_tokens as f64);
    }
}

#[cfg(test)]
mod tests;
