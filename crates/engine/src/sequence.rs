//! Per-request state the scheduler owns while a request is waiting or running.
//!
//! Invariants, kept by the methods that write the fields involved: the last
//! `spec.num_drafts()` entries of `tokens` are unverified speculative drafts (see
//! [`Sequence::attach_drafts`], [`Sequence::settle_drafts`]); `output()` never includes them;
//! a draft model's cache never runs ahead of the target's once drafts are settled
//! (`spec.draft_computed <= num_computed`). Page bookkeeping (`num_computed`, `block_table`,
//! `window_table`, `num_published_pages`) is the scheduler's alone.

mod spec_state;

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use spec_state::{Acceptance, SpecState};

use crate::constraint::ConstraintState;
use crate::kv::{PageId, SlotId};
use crate::request::{
    EngineOutput, FinishReason, GenerationRequest, PromptInfo, RequestId, SamplingParams,
    TokenLogprob,
};

/// The borrows sampling and drafting need at once (see [`Sequence::sampling_parts`]).
pub struct SamplingParts<'a> {
    /// The prompt, the output, and this step's drafts if any.
    pub tokens: &'a [u32],
    pub num_prompt_tokens: usize,
    pub block_table: &'a [PageId],
    pub params: &'a SamplingParams,
    pub rng: &'a mut StdRng,
    pub constraint: Option<&'a mut ConstraintState>,
}

impl<'a> SamplingParts<'a> {
    /// Splits the tokens into the prompt and what follows it.
    pub fn prompt_and_rest(&self) -> (&'a [u32], &'a [u32]) {
        self.tokens.split_at(self.num_prompt_tokens)
    }
}

#[derive(Debug)]
pub struct Sequence {
    pub id: RequestId,
    pub params: SamplingParams,
    /// The prompt followed by the generated tokens (and, during a step, unverified drafts).
    tokens: Vec<u32>,
    pub num_prompt_tokens: usize,
    /// Tokens whose K/V sit in the pages of `block_table` (a prefix of `tokens`).
    pub num_computed: usize,
    /// KV pages of this sequence, in position order. Empty while waiting.
    pub block_table: Vec<PageId>,
    /// The sliding-window layers' pages, index-aligned with `block_table` (pages behind the
    /// window are `kv::NULL_WINDOW_PAGE`); empty without a window pool.
    pub window_table: Vec<PageId>,
    /// Leading pages of `block_table` already handed to the prefix cache.
    pub num_published_pages: usize,
    /// The state slot while running: a model with linear-attention layers keeps its recurrent
    /// state there, a draft head its hidden rows.
    pub state_slot: Option<SlotId>,
    /// `state_slot` was just taken: the next step is the sequence's first in it.
    pub fresh_slot: bool,
    /// The pinned snapshot the next step restores into `state_slot` (a prefix-cache hit).
    pub state_restore: Option<SlotId>,
    /// The reserved snapshot slot the next step saves the state into (its end is due).
    pub state_save: Option<SlotId>,
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
    prompt_info_sent: bool,
    /// Prompt logprobs gathered so far (when asked for); entry 0 is `None`.
    pub prompt_logprobs: Vec<Option<TokenLogprob>>,
    /// Speculative decoding's share of the state (untouched when the engine does not speculate).
    pub spec: SpecState,
    /// Structured outputs: the state of the request's constraint, fed every output token.
    pub constraint: Option<ConstraintState>,
}

impl Sequence {
    pub fn new(request: GenerationRequest) -> Self {
        let mut rng = match request.params.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let device_seed = request.params.seed.unwrap_or_else(|| rng.random());
        let constraint = request
            .params
            .constraint
            .as_ref()
            .map(ConstraintState::start);
        Self {
            id: request.id,
            num_prompt_tokens: request.prompt.len(),
            tokens: request.prompt,
            params: request.params,
            num_computed: 0,
            block_table: Vec::new(),
            window_table: Vec::new(),
            num_published_pages: 0,
            state_slot: None,
            fresh_slot: false,
            state_restore: None,
            state_save: None,
            rng,
            device_seed,
            arrival: request.arrival,
            scheduled_at: None,
            num_cached_tokens: 0,
            prompt_info_sent: false,
            prompt_logprobs: Vec::new(),
            spec: SpecState::default(),
            constraint,
        }
    }

    /// The prompt followed by the generated tokens (and this step's drafts, if any).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The tokens, the pages holding them and the window table, for publishing pages to the
    /// prefix cache.
    pub fn tokens_and_pages_mut(&mut self) -> (&[u32], &mut Vec<PageId>, &[PageId]) {
        (&self.tokens, &mut self.block_table, &self.window_table)
    }

    /// Read-only tokens and pages beside the mutable RNG, for sampling and drafting.
    pub fn sampling_parts(&mut self) -> SamplingParts<'_> {
        SamplingParts {
            tokens: &self.tokens,
            num_prompt_tokens: self.num_prompt_tokens,
            block_table: &self.block_table,
            params: &self.params,
            rng: &mut self.rng,
            constraint: self.constraint.as_mut(),
        }
    }

    pub fn prompt(&self) -> &[u32] {
        &self.tokens[..self.num_prompt_tokens]
    }

    /// Generated tokens (never unverified drafts).
    pub fn output(&self) -> &[u32] {
        &self.tokens[self.num_prompt_tokens..self.num_verified()]
    }

    /// Tokens that are not drafts: the prompt and the output.
    pub fn num_verified(&self) -> usize {
        self.tokens.len() - self.spec.num_drafts
    }

    /// Tokens still to run through the model.
    pub fn num_pending(&self) -> usize {
        self.tokens.len() - self.num_computed
    }

    /// Whether the first output (with the prompt's facts) has gone out.
    pub fn prompt_info_sent(&self) -> bool {
        self.prompt_info_sent
    }

    /// Prompt logits must still be computed (so the prefix cache cannot stand in for them).
    pub fn needs_prompt_logprobs(&self) -> bool {
        self.params.prompt_logprobs.is_some() && !self.prompt_info_sent
    }

    /// Appends a generated token.
    pub fn push_token(&mut self, token: u32) {
        debug_assert_eq!(self.spec.num_drafts, 0, "a token pushed behind drafts");
        self.tokens.push(token);
    }

    /// Appends unverified drafts; the next step scores them with the last verified token.
    pub fn attach_drafts(&mut self, drafts: &[u32]) {
        self.tokens.extend_from_slice(drafts);
        self.spec.num_drafts = drafts.len();
    }

    /// After verification: the first `accepted` drafts become output and, with the token
    /// before them, computed; the rest are dropped.
    pub fn settle_drafts(&mut self, accepted: usize) {
        let verified = self.num_verified();
        let accepted = accepted.min(self.spec.num_drafts);
        self.tokens.truncate(verified + accepted);
        self.spec.num_drafts = 0;
        self.num_computed = verified + accepted;
        self.spec.draft_computed = self.spec.draft_computed.min(self.num_computed);
    }

    /// Whether `token`, the `nth` (1-based) token to follow the verified tokens, would end
    /// the sequence: an EOS or stop id, `max_tokens`, or the context limit.
    pub fn finish_reason(
        &self,
        token: u32,
        nth: usize,
        eos_token_ids: &[u32],
        max_model_len: usize,
    ) -> Option<FinishReason> {
        let params = &self.params;
        if (!params.ignore_eos && eos_token_ids.contains(&token))
            || params.stop_token_ids.contains(&token)
        {
            Some(FinishReason::Stop)
        } else if self.output().len() + nth >= params.max_tokens
            || self.num_verified() + nth >= max_model_len
        {
            Some(FinishReason::Length)
        } else {
            None
        }
    }

    /// The request's `PromptInfo`, the first time it is asked for.
    pub fn take_prompt_info(&mut self) -> Option<PromptInfo> {
        if self.prompt_info_sent {
            return None;
        }
        self.prompt_info_sent = true;
        let complete = self.prompt_logprobs.len() == self.num_prompt_tokens;
        let prompt_logprobs = match self.params.prompt_logprobs {
            Some(_) if complete => Some(std::mem::take(&mut self.prompt_logprobs)),
            _ => None,
        };
        Some(PromptInfo {
            num_prompt_tokens: self.num_prompt_tokens,
            num_cached_tokens: self.num_cached_tokens,
            prompt_logprobs,
            arrival: self.arrival,
            scheduled_at: self.scheduled_at,
        })
    }

    /// The last output of a request that ends without a new token.
    pub fn final_output(&mut self, finish: FinishReason) -> EngineOutput {
        EngineOutput {
            id: self.id,
            prompt: self.take_prompt_info(),
            tokens: Vec::new(),
            logprobs: Vec::new(),
            finish: Some(finish),
            speculation: self.spec.summary(),
        }
    }

    /// Back to the waiting state after its pages were taken away: everything is recomputed.
    /// Returns its block table and window table, for release.
    pub fn reset_for_recompute(&mut self) -> (Vec<PageId>, Vec<PageId>) {
        self.num_computed = 0;
        self.spec.draft_computed = 0;
        self.num_published_pages = 0;
        if !self.prompt_info_sent {
            self.prompt_logprobs.clear();
        }
        (
            std::mem::take(&mut self.block_table),
            std::mem::take(&mut self.window_table),
        )
    }
}
