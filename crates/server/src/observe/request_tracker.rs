//! Per-request timelines, kept on the detokenizer thread from the engine's outputs: they feed
//! the latency histograms as tokens arrive, and at the finish become one [`FinishedRequest`]
//! for the metrics and the request log.
//!
//! Intervals follow vLLM: queue = arrival to first scheduling, prefill = first scheduling to
//! first token, decode = first token to last token, TTFT = arrival to first token, e2e =
//! arrival to finish, inter-token latency = gap between consecutive tokens of a request.
//! Token instants are those of the engine step that produced them ([`EngineStep::at`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite_engine::{EngineOutput, EngineStep, FinishReason, RequestId};
use tokenizers::Tokenizer;

use crate::observe::finished_request::FinishedRequest;
use crate::observe::metrics::Metrics;
use crate::observe::request_log::{self, RequestLogConfig};
use crate::observe::request_names::RequestNames;
use crate::observe::traces::Tracer;

struct Timeline {
    arrival: Instant,
    scheduled_at: Option<Instant>,
    first_token_at: Option<Instant>,
    last_token_at: Option<Instant>,
    num_prompt_tokens: usize,
    num_cached_tokens: usize,
    num_generation_tokens: usize,
    prompt_ids: Option<Arc<Vec<u32>>>,
    output_ids: Option<Vec<u32>>,
    request_id: Option<Arc<str>>,
}

impl Timeline {
    fn finish(self, id: RequestId, finish: FinishReason, at: Instant) -> FinishedRequest {
        let since = |later: Instant, earlier: Instant| later.saturating_duration_since(earlier);
        // A request that never ran waited its whole life; one without a token prefilled until
        // it ended.
        let queue = since(self.scheduled_at.unwrap_or(at), self.arrival);
        let prefill = self.scheduled_at.map_or(Duration::ZERO, |s| {
            since(self.first_token_at.unwrap_or(at), s)
        });
        let decode = match (self.first_token_at, self.last_token_at) {
            (Some(first), Some(last)) => since(last, first),
            _ => Duration::ZERO,
        };
        FinishedRequest {
            id,
            request_id: self.request_id,
            finish,
            num_prompt_tokens: self.num_prompt_tokens,
            num_cached_tokens: self.num_cached_tokens,
            num_generation_tokens: self.num_generation_tokens,
            queue,
            prefill,
            decode,
            time_to_first_token: self.first_token_at.map(|f| since(f, self.arrival)),
            e2e: since(at, self.arrival),
            prompt_ids: self.prompt_ids,
            output_ids: self.output_ids,
            speculation: None,
        }
    }
}

pub struct RequestTracker {
    metrics: Arc<Metrics>,
    log: RequestLogConfig,
    live: HashMap<RequestId, Timeline>,
    finished: Vec<FinishedRequest>,
    tracer: Option<Arc<Tracer>>,
    names: RequestNames,
}

impl RequestTracker {
    pub fn new(metrics: Arc<Metrics>, log: RequestLogConfig) -> Self {
        Self {
            metrics,
            log,
            live: HashMap::new(),
            finished: Vec::new(),
            tracer: None,
            names: RequestNames::default(),
        }
    }

    /// Take each request's client id from `names` (filled at submission).
    pub fn with_names(mut self, names: RequestNames) -> Self {
        self.names = names;
        self
    }

    /// Also hand every finished request to `tracer` (its span).
    pub fn with_tracer(mut self, tracer: Option<Arc<Tracer>>) -> Self {
        self.tracer = tracer;
        self
    }

    pub fn on_step(&mut self, step: &EngineStep) {
        if let Some(stats) = &step.stats {
            self.metrics.observe_step(stats);
        }
    }

    /// Whether [`Self::on_output`] wants the prompt's token ids.
    pub fn wants_prompt_ids(&self) -> bool {
        self.log.token_ids || self.log.prompts
    }

    /// One engine output produced at `at`. `finish` is how the request ended for its client if
    /// it did (a stop string matched here makes it `Stop`). Outputs after the finish (the
    /// engine's abort following a stop string) are ignored.
    pub fn on_output(
        &mut self,
        out: &EngineOutput,
        at: Instant,
        finish: Option<FinishReason>,
        prompt_ids: Option<Arc<Vec<u32>>>,
    ) {
        if let Some(p) = &out.prompt {
            self.live.insert(
                out.id,
                Timeline {
                    arrival: p.arrival,
                    scheduled_at: p.scheduled_at,
                    first_token_at: None,
                    last_token_at: None,
                    num_prompt_tokens: p.num_prompt_tokens,
                    num_cached_tokens: p.num_cached_tokens,
                    num_generation_tokens: 0,
                    prompt_ids,
                    output_ids: self.log.token_ids.then(Vec::new),
                    request_id: self.names.take(out.id),
                },
            );
        }
        let Some(t) = self.live.get_mut(&out.id) else {
            return;
        };
        if !out.tokens.is_empty() {
            match t.last_token_at {
                None => {
                    t.first_token_at = Some(at);
                    self.metrics
                        .observe_first_token(at.saturating_duration_since(t.arrival));
                }
                Some(last) => self
                    .metrics
                    .observe_token_gap(at.saturating_duration_since(last)),
            }
            t.last_token_at = Some(at);
            t.num_generation_tokens += out.tokens.len();
            if let Some(ids) = &mut t.output_ids {
                ids.extend_from_slice(&out.tokens);
            }
        }
        if let Some(reason) = finish {
            if let Some(t) = self.live.remove(&out.id) {
                let mut finished = t.finish(out.id, reason, at);
                finished.speculation = out.speculation;
                self.finished.push(finished);
            }
        }
    }

    /// Records and logs the requests finished since the last call (kept apart from
    /// [`Self::on_output`] so that the detokenizer does it without holding the registry lock).
    pub fn report_finished(&mut self, tokenizer: &Tokenizer) {
        for r in self.finished.drain(..) {
            // Log first: once a scrape counts a request, its line is written.
            request_log::log_finished(&r, &self.log, tokenizer);
            self.metrics.observe_finished(&r);
            if let Some(tracer) = &self.tracer {
                tracer.on_finished(&r);
            }
        }
    }

    /// Requests seen and not finished.
    pub fn num_live(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests;
