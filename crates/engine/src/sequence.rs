//! Per-request state the scheduler owns while a request is waiting or running.

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::kv::PageId;
use crate::request::{GenerationRequest, RequestId, SamplingParams, TokenLogprob};
use crate::spec::policy::Acceptance;

#[derive(Debug)]
pub struct Sequence {
    pub id: RequestId,
    pub params: SamplingParams,
    /// The prompt followed by the generated tokens.
    pub tokens: Vec<u32>,
    pub num_prompt_tokens: usize,
    /// Tokens whose K/V sit in the pages of `block_table` (a prefix of `tokens`).
    pub num_computed: usize,
    /// KV pages of this sequence, in position order. Empty while waiting.
    pub block_table: Vec<PageId>,
    /// Leading pages of `block_table` already handed to the prefix cache.
    pub num_published_pages: usize,
    /// This request's own RNG, so a seed gives the same tokens whatever shares the batch.
    pub rng: StdRng,
    /// Key of the counter-based RNG a backend samples with on its device: the request's seed,
    /// or one drawn from `rng` at arrival.
    pub device_seed: u64,
    pub arrival: Instant,
    /// First admission to the running batch.
    pub scheduled_at: Option<Instant>,
    /// Prompt tokens found in the prefix cache at the latest admission before the first token.
    pub num_cached_tokens: usize,
    /// Whether the first output (with its `PromptInfo`) has gone out.
    pub prompt_info_sent: bool,
    /// Prompt logprobs gathered so far (when asked for); entry 0 is `None`.
    pub prompt_logprobs: Vec<Option<TokenLogprob>>,
    /// Speculative drafts at the end of `tokens` this step, not yet verified.
    pub num_drafts: usize,
    /// Leading tokens whose K/V a draft model holds in its cache.
    pub draft_computed: usize,
    /// This sequence's record with speculation: its acceptance rate, and totals for the log.
    pub acceptance: Acceptance,
    pub spec_rounds: usize,
    pub drafted_total: usize,
    pub accepted_total: usize,
}

impl Sequence {
    pub fn new(request: GenerationRequest) -> Self {
        let mut rng = match request.params.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let device_seed = request.params.seed.unwrap_or_else(|| rng.random());
        Self {
            id: request.id,
            num_prompt_tokens: request.prompt.len(),
            tokens: request.prompt,
            params: request.params,
            num_computed: 0,
            block_table: Vec::new(),
            num_published_pages: 0,
            rng,
            device_seed,
            arrival: request.arrival,
            scheduled_at: None,
            num_cached_tokens: 0,
            prompt_info_sent: false,
            prompt_logprobs: Vec::new(),
            num_drafts: 0,
            draft_computed: 0,
            acceptance: Acceptance::default(),
            spec_rounds: 0,
            drafted_total: 0,
            accepted_total: 0,
        }
    }

    pub fn prompt(&self) -> &[u32] {
        &self.tokens[..self.num_prompt_tokens]
    }

    pub fn output(&self) -> &[u32] {
        &self.tokens[self.num_prompt_tokens..self.tokens.len() - self.num_drafts]
    }

    /// Tokens still to run through the model.
    pub fn num_pending(&self) -> usize {
        self.tokens.len() - self.num_computed
    }

    /// Prompt logits must still be computed (so the prefix cache cannot stand in for them).
    pub fn needs_prompt_logprobs(&self) -> bool {
        self.params.prompt_logprobs.is_some() && !self.prompt_info_sent
    }

    /// Back to the waiting state after its pages were taken away: everything is recomputed.
    pub fn reset_for_recompute(&mut self) -> Vec<PageId> {
        self.num_computed = 0;
        self.draft_computed = 0;
        self.num_published_pages = 0;
        if !self.prompt_info_sent {
            self.prompt_logprobs.clear();
        }
        std::mem::take(&mut self.block_table)
    }
}
