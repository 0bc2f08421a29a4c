//! Every statistic the engine keeps: what the scheduler thread publishes for /metrics and
//! admission ([`EngineStats`]), what one step cost ([`StepStats`]), what a plan learned about
//! the prefix cache ([`StepCounters`]), speculative-decoding totals ([`SpecCounters`],
//! published as [`SpecStats`]), one request's speculation ([`SpecSummary`]), and the tokens a
//! mixture-of-experts model routed to each expert ([`ExpertLoad`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::MAX_SPEC_TOKENS;

/// Live numbers the scheduler publishes after every step (read by /metrics and admission).
#[derive(Debug, Default)]
pub struct EngineStats {
    pub num_running: AtomicUsize,
    pub num_waiting: AtomicUsize,
    pub kv_pages_total: AtomicUsize,
    /// Pages referenced by at least one live sequence (cached-but-unreferenced pages are free).
    pub kv_pages_used: AtomicUsize,
    /// The sliding-window layers' own pool (0 without one): pages, and those held by
    /// sequences or kept with cached pages.
    pub window_pages_total: AtomicUsize,
    pub window_pages_used: AtomicUsize,
    pub prompt_tokens_total: AtomicU64,
    pub generation_tokens_total: AtomicU64,
    /// Prompt tokens looked up in the prefix cache, and those found there.
    pub prefix_cache_queries_total: AtomicU64,
    pub prefix_cache_hits_total: AtomicU64,
    pub num_preemptions_total: AtomicU64,
    pub steps_total: AtomicU64,
    pub speculation: SpecStats,
}

/// How full the scheduler is, as [`EngineStats::publish`] stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    pub num_running: usize,
    pub num_waiting: usize,
    pub kv_pages_total: usize,
    pub kv_pages_used: usize,
    pub window_pages_total: usize,
    pub window_pages_used: usize,
}

impl EngineStats {
    /// Fraction of KV pages in use, 0..=1: of the fuller pool where the sliding-window
    /// layers keep their own (whichever runs out first limits the running sequences).
    pub fn kv_cache_usage(&self) -> f64 {
        let fraction = |used: &AtomicUsize, total: &AtomicUsize| {
            let total = total.load(Ordering::Relaxed);
            match total {
                0 => 0.0,
                _ => used.load(Ordering::Relaxed) as f64 / total as f64,
            }
        };
        let pages = fraction(&self.kv_pages_used, &self.kv_pages_total);
        let window = fraction(&self.window_pages_used, &self.window_pages_total);
        pages.max(window)
    }

    /// Adds what admission learned while planning a step.
    pub(crate) fn count_plan(&self, counters: &StepCounters) {
        let add = |total: &AtomicU64, n: u64| total.fetch_add(n, Ordering::Relaxed);
        add(
            &self.prefix_cache_queries_total,
            counters.prefix_queried_tokens,
        );
        add(&self.prefix_cache_hits_total, counters.prefix_hit_tokens);
        add(&self.num_preemptions_total, counters.preemptions);
    }

    /// Adds the tokens a step's commit produced.
    pub(crate) fn count_tokens(&self, prompt: u64, generated: u64) {
        self.prompt_tokens_total
            .fetch_add(prompt, Ordering::Relaxed);
        self.generation_tokens_total
            .fetch_add(generated, Ordering::Relaxed);
    }

    /// Stores the scheduler's occupancy and, when speculating, the speculation totals.
    pub(crate) fn publish(&self, occupancy: Occupancy, speculation: Option<&SpecCounters>) {
        if let Some(counters) = speculation {
            self.speculation.publish(counters);
        }
        let store = |slot: &AtomicUsize, v: usize| slot.store(v, Ordering::Relaxed);
        store(&self.num_running, occupancy.num_running);
        store(&self.num_waiting, occupancy.num_waiting);
        store(&self.kv_pages_total, occupancy.kv_pages_total);
        store(&self.kv_pages_used, occupancy.kv_pages_used);
        store(&self.window_pages_total, occupancy.window_pages_total);
        store(&self.window_pages_used, occupancy.window_pages_used);
    }
}

/// Speculative-decoding totals, as the scheduler thread last published them.
#[derive(Debug, Default)]
pub struct SpecStats {
    pub enabled: AtomicBool,
    pub num_drafts: AtomicU64,
    pub num_draft_tokens: AtomicU64,
    pub num_accepted_tokens: AtomicU64,
    /// Entry `i`: rounds whose draft at position `i` was accepted.
    pub num_accepted_tokens_per_pos: [AtomicU64; MAX_SPEC_TOKENS],
    /// Drafts per step at most (positions past it are always 0).
    pub num_tokens: AtomicUsize,
}

impl SpecStats {
    pub(crate) fn enable(&self, max_drafts: usize) {
        self.enabled.store(true, Ordering::Relaxed);
        self.num_tokens.store(max_drafts, Ordering::Relaxed);
    }

    fn publish(&self, c: &SpecCounters) {
        self.num_drafts.store(c.num_drafts, Ordering::Relaxed);
        self.num_draft_tokens
            .store(c.num_draft_tokens, Ordering::Relaxed);
        self.num_accepted_tokens
            .store(c.num_accepted_tokens, Ordering::Relaxed);
        for (slot, &v) in self
            .num_accepted_tokens_per_pos
            .iter()
            .zip(&c.num_accepted_tokens_per_pos)
        {
            slot.store(v, Ordering::Relaxed);
        }
    }
}

/// Speculation totals since start, in vLLM's terms: a "draft" is one sequence's speculative
/// round. Kept by the scheduler thread, published as [`SpecStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecCounters {
    pub num_drafts: u64,
    pub num_draft_tokens: u64,
    pub num_accepted_tokens: u64,
    /// Entry `i`: rounds whose draft at position `i` was accepted.
    pub num_accepted_tokens_per_pos: Vec<u64>,
}

/// What admission learned about the prefix cache while planning a step.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StepCounters {
    pub prefix_queried_tokens: u64,
    pub prefix_hit_tokens: u64,
    pub preemptions: u64,
}

/// Where the time of one step went, and how much work it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepStats {
    /// Planning the step and building the batch (the scheduler's own cost).
    pub schedule: Duration,
    /// Speculative drafting before the forward pass (zero without speculation).
    pub draft: Duration,
    /// The backend's forward pass.
    pub forward: Duration,
    /// Sampling, finish checks and cache bookkeeping after the forward pass.
    pub sample: Duration,
    /// Tokens the forward pass computed (prefill chunks plus decodes).
    pub num_tokens: usize,
    /// Sequences in the batch.
    pub num_seqs: usize,
}

/// One request's speculative decoding, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecSummary {
    /// Steps in which the request's drafts were verified.
    pub rounds: usize,
    pub drafted: usize,
    pub accepted: usize,
}

impl SpecSummary {
    /// Tokens per verification step (vLLM's "mean acceptance length"): 1 + accepted / rounds.
    pub fn mean_acceptance_length(&self) -> f64 {
        1.0 + self.accepted as f64 / self.rounds.max(1) as f64
    }
}

/// Tokens the router sent to each expert of each layer since load, counted by a backend whose
/// model has mixture-of-experts layers (a dense layer has no experts) and read by /metrics.
#[derive(Debug, Default)]
pub struct ExpertLoad {
    layers: Vec<Vec<AtomicU64>>,
}

impl ExpertLoad {
    /// Zeroed counters, `experts[l]` of them for layer `l` (0 for a dense layer).
    pub fn new(experts: impl IntoIterator<Item = usize>) -> Self {
        Self {
            layers: experts
                .into_iter()
                .map(|n| (0..n).map(|_| AtomicU64::new(0)).collect())
                .collect(),
        }
    }

    /// The counters of layer `layer`, one per expert, for the backend to add to.
    pub fn layer(&self, layer: usize) -> &[AtomicU64] {
        &self.layers[layer]
    }

    /// Whether any layer has experts.
    pub fn has_experts(&self) -> bool {
        self.layers.iter().any(|l| !l.is_empty())
    }

    /// The counts now, per layer and expert.
    pub fn snapshot(&self) -> Vec<Vec<u64>> {
        self.layers
            .iter()
            .map(|l| l.iter().map(|c| c.load(Ordering::Relaxed)).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_cache_usage_is_the_fuller_pool() {
        let stats = EngineStats::default();
        let occupancy = |used, window_used| Occupancy {
            num_running: 1,
            num_waiting: 0,
            kv_pages_total: 100,
            kv_pages_used: used,
            window_pages_total: 10,
            window_pages_used: window_used,
        };
        stats.publish(occupancy(50, 2), None);
        assert_eq!(stats.kv_cache_usage(), 0.5);
        stats.publish(occupancy(50, 9), None);
        assert_eq!(stats.kv_cache_usage(), 0.9);
        let no_window = Occupancy {
            window_pages_total: 0,
            window_pages_used: 0,
            ..occupancy(25, 0)
        };
        stats.publish(no_window, None);
        assert_eq!(stats.kv_cache_usage(), 0.25);
    }
}
