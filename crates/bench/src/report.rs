//! The result of a run: throughput, latency distributions, goodput and prefix-cache reuse,
//! computed from the request records (serialized as-is for `--json`).

use serde::Serialize;

use crate::config::{Endpoint, Slo};
use crate::record::{Outcome, RequestRecord};
use crate::server_metrics::PrefixCacheDelta;
use crate::stats::Summary;
use crate::workload::Lengths;

/// Who was benchmarked with what.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub url: String,
    pub model: String,
    pub endpoint: Endpoint,
    pub workload: String,
    pub lengths: Option<Lengths>,
    pub num_requests: usize,
    /// Requests/s of the Poisson arrivals; `None`: as fast as allowed.
    pub request_rate: Option<f64>,
    pub max_concurrency: Option<usize>,
    pub max_duration_s: f64,
    pub seed: u64,
    pub ignore_eos: bool,
    pub token_counter: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub info: RunInfo,
    pub completed: usize,
    pub failed: usize,
    /// Outstanding when the run hit `--max-duration` (their numbers are not counted).
    pub cancelled: usize,
    /// Planned requests never sent because the run stopped early.
    pub not_sent: usize,
    /// Why the run stopped before sending every request, if it did.
    pub stopped_early: Option<String>,
    /// From the first request sent to the last one finished.
    pub duration_s: f64,
    pub total_input_tokens: usize,
    pub total_output_tokens: usize,
    /// Whether every completed request's token counts came from the server's `usage`.
    pub token_counts_from_usage: bool,
    pub request_throughput: f64,
    pub input_token_throughput: f64,
    pub output_token_throughput: f64,
    pub total_token_throughput: f64,
    /// Milliseconds.
    pub ttft_ms: Option<Summary>,
    pub itl_ms: Option<Summary>,
    pub tpot_ms: Option<Summary>,
    pub e2e_ms: Option<Summary>,
    pub slo: Option<Slo>,
    /// Completed requests meeting every SLO, and them per second.
    pub slo_met: Option<usize>,
    pub goodput: Option<f64>,
    /// From the server's `/metrics`; `None`: it exposes no prefix-cache counters.
    pub server_prefix_cache: Option<PrefixCacheDelta>,
    /// Σ usage.prompt_tokens_details.cached_tokens / Σ prompt tokens, over the requests that
    /// reported it.
    pub usage_cached_fraction: Option<f64>,
    /// Up to five distinct failure messages.
    pub errors: Vec<String>,
    /// Every request's record, in completion order (left out of the JSON when emptied).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestRecord>,
}

/// How the run ended, besides its records.
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    pub duration_s: f64,
    pub cancelled: usize,
    pub not_sent: usize,
    pub stopped_early: Option<String>,
}

pub fn summarize(
    info: RunInfo,
    records: Vec<RequestRecord>,
    end: RunEnd,
    slo: Option<Slo>,
    server_prefix_cache: Option<PrefixCacheDelta>,
) -> BenchReport {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.succeeded()).collect();
    let completed = ok.len();
    let ms = |values: Vec<f64>| Summary::of(&values).map(|s| s.scaled(1000.0));
    let total_input: usize = ok.iter().map(|r| r.prompt_tokens).sum();
    let total_output: usize = ok.iter().map(|r| r.output_tokens).sum();
    let per_s = |x: f64| {
        if end.duration_s > 0.0 {
            x / end.duration_s
        } else {
            0.0
        }
    };
    let slo_met = slo
        .as_ref()
        .map(|s| ok.iter().filter(|r| r.meets(s)).count());
    let with_cached: Vec<&&RequestRecord> =
        ok.iter().filter(|r| r.cached_tokens.is_some()).collect();
    let cached: usize = with_cached.iter().filter_map(|r| r.cached_tokens).sum();
    let cached_of: usize = with_cached.iter().map(|r| r.prompt_tokens).sum();
    let mut errors: Vec<String> = Vec::new();
    for r in &records {
        if let Outcome::Failed(e) = &r.outcome {
            if errors.len() < 5 && !errors.contains(e) {
                errors.push(e.clone());
            }
        }
    }
    BenchReport {
        info,
        completed,
        failed: records.len() - completed,
        cancelled: end.cancelled,
        not_sent: end.not_sent,
        stopped_early: end.stopped_early,
        duration_s: end.duration_s,
        total_input_tokens: total_input,
        total_output_tokens: total_output,
        token_counts_from_usage: !ok.is_empty() && ok.iter().all(|r| r.usage_reported),
        request_throughput: per_s(completed as f64),
        input_token_throughput: per_s(total_input as f64),
        output_token_throughput: per_s(total_output as f64),
        total_token_throughput: per_s((total_input + total_output) as f64),
        ttft_ms: ms(ok.iter().filter_map(|r| r.ttft).collect()),
        itl_ms: ms(ok.iter().flat_map(|r| r.itls.iter().copied()).collect()),
        tpot_ms: ms(ok.iter().filter_map(|r| r.tpot()).collect()),
        e2e_ms: ms(ok.iter().map(|r| r.e2e).collect()),
        goodput: slo_met.map(|n| per_s(n as f64)),
        slo_met,
        slo,
        server_prefix_cache,
        usage_cached_fraction: (cached_of > 0).then(|| cached as f64 / cached_of as f64),
        errors,
        requests: records,
    }
}
