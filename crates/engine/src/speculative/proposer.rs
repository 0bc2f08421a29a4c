//! Where speculative tokens come from: the [`Proposer`] interface, and the n-gram proposer.

use rand::rngs::StdRng;

use super::ngram::{self, NgramConfig};
use crate::backend::{Backend, BackendError, SeqBatch};
use crate::distribution::Distribution;
use crate::request::{RequestId, SamplingParams};
use crate::sampler::Sampler;

/// One sequence asking for drafts.
pub struct DraftRequest<'a> {
    pub id: RequestId,
    /// The sequence so far (prompt and output). Its last token has not run through the target
    /// yet: the target will score it together with the drafts.
    pub tokens: &'a [u32],
    pub num_prompt_tokens: usize,
    /// Leading tokens whose K/V the proposer already holds (a draft model's cache).
    pub draft_computed: usize,
    /// KV pages of the sequence, covering positions `0..tokens.len() + k` at least.
    pub block_table: &'a [u32],
    /// The sequence's recurrent-state slot (a hybrid model's), where the target keeps what a
    /// proposer inside it continues from.
    pub state_slot: Option<u32>,
    pub params: &'a SamplingParams,
    /// Drafts wanted at most.
    pub k: usize,
    pub rng: &'a mut StdRng,
}

/// What a proposer offers for one sequence.
#[derive(Debug, Clone, Default)]
pub struct Drafts {
    /// At most `k` tokens, possibly none.
    pub tokens: Vec<u32>,
    /// The distribution each token was drawn from (same length as `tokens`).
    pub q: Vec<Distribution>,
    /// The proposer's cache now holds K/V for this many leading tokens of
    /// `tokens ++ drafts` (valid as long as the drafts before that point are accepted).
    pub draft_computed: usize,
    /// From a proposer that [`Proposer::scores_drafts`]: the chance that drafts `0..=i` are
    /// all accepted, for each `i` (non-increasing). Empty otherwise.
    pub chances: Vec<f64>,
}

impl Drafts {
    /// Draws the next draft of `request` from a proposer model's logits `row`: `sampler`'s
    /// distribution for the request after its output and the drafts so far (kept as q).
    pub fn push_sampled(
        &mut self,
        sampler: &mut Sampler,
        row: &[f32],
        request: &mut DraftRequest<'_>,
    ) {
        let r = request;
        let mut output = r.tokens[r.num_prompt_tokens..].to_vec();
        output.extend_from_slice(&self.tokens);
        let prompt = &r.tokens[..r.num_prompt_tokens];
        let q = sampler.distribution(row, r.params, prompt, &output);
        self.tokens.push(q.sample(r.rng).unwrap_or_default());
        self.q.push(q);
    }
}

pub trait Proposer: Send {
    /// Short name for logs and metrics (`ngram`, `suffix`, `draft`).
    fn name(&self) -> &'static str;
    /// KV bytes per token the proposer keeps (by default 0: no cache, no model).
    fn kv_bytes_per_token(&self) -> usize {
        0
    }
    /// Readies the target for a proposer that runs inside it (its MTP layer), before the
    /// KV pool is sized. Nothing by default.
    fn prepare_target(&self, _target: &mut dyn Backend) -> Result<(), BackendError> {
        Ok(())
    }
    /// Allocates the proposer's KV cache with the target's page geometry: the same page ids
    /// address both caches, so the scheduler's block tables serve both. Nothing by default.
    fn init_kv_cache(&mut self, _num_pages: usize, _page_size: usize) -> Result<(), BackendError> {
        Ok(())
    }
    /// The target runs these prefill chunks this step; a proposer with a cache computes them
    /// too, so that it knows the prompts when it is asked for drafts. Nothing by default.
    fn observe(&mut self, _batch: &[SeqBatch<'_>]) -> Result<(), BackendError> {
        Ok(())
    }
    /// Drafts for each request, in order. `target`: the model being decoded (a proposer that
    /// is a part of it, its MTP layer, runs there).
    fn propose(
        &mut self,
        requests: &mut [DraftRequest<'_>],
        target: &mut dyn Backend,
    ) -> Result<Vec<Drafts>, BackendError>;
    /// What one draft step cost in the last `propose`, which took `propose_seconds` for `k`
    /// drafts, for the policy; `None`: nothing to learn from this call. By default the whole
    /// call's share per draft (a proposer without a model). A draft model counts only its steps
    /// that fed at most two tokens per sequence: a first step that catches up on many tokens it
    /// had not seen (after rounds without speculation) is a one-off, and counting it as the
    /// price of every step would switch speculation off for good.
    fn step_seconds(&self, propose_seconds: f64, k: usize) -> Option<f64> {
        Some(propose_seconds / k.max(1) as f64)
    }
    /// Whether its drafts come with calibrated chances ([`Drafts::chances`]): the step then
    /// asks for as many as allowed and keeps the number that pays, instead of choosing k from
    /// the sequence's past acceptance.
    fn scores_drafts(&self) -> bool {
        false
    }
    /// The target kept `accepted` of the `drafted` drafts last proposed for request `id`.
    fn verdict(&mut self, _id: RequestId, _drafted: usize, _accepted: usize) {}
    /// Request `id` is gone (finished or aborted): whatever is kept for it can go.
    fn finished(&mut self, _id: RequestId) {}
}

/// Prompt lookup: no model, no cache; proposals are certain (point masses).
#[derive(Debug, Clone, Default)]
pub struct NgramProposer {
    pub config: NgramConfig,
}

impl Proposer for NgramProposer {
    fn name(&self) -> &'static str {
        "ngram"
    }
    fn propose(
        &mut self,
        requests: &mut [DraftRequest<'_>],
        _target: &mut dyn Backend,
    ) -> Result<Vec<Drafts>, BackendError> {
        Ok(requests
            .iter()
            .map(|r| {
                let tokens = ngram::propose(r.tokens, r.k, self.config);
                Drafts {
                    q: tokens.iter().map(|&t| Distribution::point(t)).collect(),
                    tokens,
                    draft_computed: r.draft_computed,
                    chances: Vec::new(),
                }
            })
            .collect())
    }
}
