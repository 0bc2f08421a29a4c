//! Drives an [`EngineCore`] over the fake backend step by step and checks, after every step,
//! the invariants every test relies on: exact page accounting, the token budget, the seat
//! limit, one `PromptInfo` on each request's first output, nothing after a finish.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::config::SchedulingPolicy;
use crate::engine_loop::EngineCore;
use crate::kv::KvManager;
use crate::request::{
    EngineOutput, FinishReason, GenerationRequest, PromptInfo, RequestId, SamplingParams,
    TokenLogprob,
};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::stats::EngineStats;
use crate::testing::fake_backend::{BatchLog, FakeBackend};
use crate::Backend;

#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub num_pages: usize,
    pub page_size: usize,
    pub budget: usize,
    pub max_seqs: usize,
    pub prefix_caching: bool,
    pub max_context: usize,
    /// Sliding-window layers in a pool of their own: (window, pages).
    pub window: Option<(usize, usize)>,
    /// A model with recurrent state: (snapshots kept, snapshot interval in tokens).
    pub recurrent: Option<(usize, usize)>,
    pub policy: SchedulingPolicy,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            num_pages: 512,
            page_size: 16,
            budget: 2048,
            max_seqs: 64,
            prefix_caching: true,
            max_context: 4096,
            window: None,
            recurrent: None,
            policy: SchedulingPolicy::Fcfs,
        }
    }
}

/// Everything one request received.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Received {
    pub tokens: Vec<u32>,
    pub logprobs: Vec<TokenLogprob>,
    pub finish: Option<FinishReason>,
    pub num_cached_tokens: usize,
    pub prompt_logprobs: Option<Vec<Option<TokenLogprob>>>,
    /// Step number of the first output.
    pub first_step: usize,
    /// Steps that produced a token for this request.
    pub token_steps: Vec<usize>,
}

pub struct Harness {
    pub setup: Setup,
    pub core: EngineCore,
    pub log: BatchLog,
    pub stats: Arc<EngineStats>,
    pub received: HashMap<RequestId, Received>,
    pub steps: usize,
    /// Request ids in the order their first output arrived.
    pub first_output_order: Vec<RequestId>,
}

pub fn request(id: RequestId, prompt: Vec<u32>, params: SamplingParams) -> GenerationRequest {
    GenerationRequest {
        id,
        prompt,
        params,
        arrival: Instant::now(),
    }
}

pub fn greedy(max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        max_tokens,
        ..SamplingParams::default()
    }
}

impl Harness {
    pub fn new(setup: Setup, eos: Vec<u32>) -> Self {
        Self::with_backend(setup, eos, FakeBackend::new(setup.max_context))
    }

    pub fn with_backend(setup: Setup, eos: Vec<u32>, mut backend: FakeBackend) -> Self {
        let mut kv = KvManager::new(setup.num_pages, setup.page_size, setup.prefix_caching);
        if let Some((window, pages)) = setup.window {
            backend.window = Some(window);
            backend.init_window_kv_cache(pages + 1).unwrap();
            kv = kv.with_window_pages(window, pages);
        }
        if let Some((snapshots, interval)) = setup.recurrent {
            backend.recurrent = true;
            backend
                .init_state_slots(setup.max_seqs + snapshots)
                .unwrap();
            backend.init_state_rewind(setup.max_seqs, 33).unwrap();
            kv = kv.with_state_slots(setup.max_seqs, snapshots, interval);
        }
        backend
            .init_kv_cache(setup.num_pages, setup.page_size)
            .unwrap();
        let log = backend.log.clone();
        let scheduler = Scheduler::new(
            SchedulerConfig {
                max_num_batched_tokens: setup.budget,
                max_num_seqs: setup.max_seqs,
                prefill_per_decode: 0,
                policy: setup.policy,
            },
            kv,
        );
        let stats = Arc::new(EngineStats::default());
        let max_model_len = setup.max_context.min(setup.num_pages * setup.page_size);
        let core = EngineCore::new(
            scheduler,
            Box::new(backend),
            eos,
            max_model_len,
            stats.clone(),
        );
        Self {
            setup,
            core,
            log,
            stats,
            received: HashMap::new(),
            steps: 0,
            first_output_order: Vec::new(),
        }
    }

    pub fn add(&mut self, request: GenerationRequest) {
        self.core.add_request(request);
    }

    pub fn step(&mut self) {
        let calls_before = self.log.lock().unwrap().len();
        let outputs = self.core.step();
        self.steps += 1;
        self.core.scheduler().check_accounting().unwrap();
        let log = self.log.lock().unwrap();
        assert!(log.len() <= calls_before + 1, "one forward per step");
        if let Some(&(tokens, seqs)) = log.get(calls_before) {
            assert!(tokens <= self.setup.budget, "{tokens} tokens > budget");
            assert!(
                seqs <= self.setup.max_seqs,
                "{seqs} sequences > max_num_seqs"
            );
        }
        drop(log);
        for output in outputs {
            self.record(output);
        }
        let stats = &self.stats;
        assert_eq!(
            stats.num_running.load(Ordering::Relaxed),
            self.core.scheduler().num_running()
        );
        assert_eq!(
            stats.kv_pages_used.load(Ordering::Relaxed),
            self.core.scheduler().kv().num_referenced()
        );
    }

    fn record(&mut self, output: EngineOutput) {
        let step = self.steps;
        let first = !self.received.contains_key(&output.id);
        let entry = self.received.entry(output.id).or_default();
        assert!(
            entry.finish.is_none(),
            "output after finish for {}",
            output.id
        );
        assert_eq!(
            output.prompt.is_some(),
            first,
            "PromptInfo iff first output"
        );
        if let Some(PromptInfo {
            num_cached_tokens,
            prompt_logprobs,
            ..
        }) = output.prompt
        {
            entry.num_cached_tokens = num_cached_tokens;
            entry.prompt_logprobs = prompt_logprobs;
            entry.first_step = step;
            self.first_output_order.push(output.id);
        }
        if !output.tokens.is_empty() {
            entry.token_steps.push(step);
        }
        if !output.logprobs.is_empty() {
            assert_eq!(output.logprobs.len(), output.tokens.len());
        }
        entry.tokens.extend(&output.tokens);
        entry.logprobs.extend(output.logprobs);
        entry.finish = output.finish;
    }

    /// Step until nothing is left; panics on a livelock.
    pub fn run_to_completion(&mut self) {
        let limit = self.steps + 20_000;
        while self.core.has_work() {
            assert!(self.steps < limit, "engine did not drain");
            self.step();
        }
    }
}
