//! Speculative decoding inside an engine step: before the target pass, draft tokens for the
//! decoding sequences and attach them to their chunks; after it, verify each sequence's drafts
//! against the target's rows.

use std::time::Instant;

use super::policy::SpecPolicy;
use super::proposer::{DraftRequest, Proposer};
use super::verify::{verify_greedy, verify_sampled, Verdict};
use crate::backend::{BackendError, ForwardOutput};
use crate::distribution::Distribution;
use crate::request::RequestId;
use crate::sampler::{is_greedy, Sampler};
use crate::scheduler::{ScheduledChunk, Scheduler, StepPlan};
use crate::sequence::Sequence;
use crate::stats::SpecCounters;

pub struct Speculation {
    proposer: Box<dyn Proposer>,
    policy: SpecPolicy,
    sampler: Sampler,
    /// Draft distributions of this step's chunks, by request, until verification.
    pending: Vec<(RequestId, Vec<Distribution>, usize)>,
    /// No drafts in steps with more decoding sequences than this.
    pub disable_by_batch_size: Option<usize>,
    pub counters: SpecCounters,
}

impl Speculation {
    /// `adaptive`: choose k (0 included) each step by measured cost; else always `max_k`.
    pub fn new(proposer: Box<dyn Proposer>, max_k: usize, adaptive: bool) -> Self {
        let mut policy = SpecPolicy::new(max_k);
        policy.fixed = !adaptive;
        Self {
            proposer,
            policy,
            sampler: Sampler::default(),
            pending: Vec::new(),
            disable_by_batch_size: None,
            counters: SpecCounters {
                num_accepted_tokens_per_pos: vec![0; max_k],
                ..SpecCounters::default()
            },
        }
    }

    pub fn method(&self) -> &'static str {
        self.proposer.name()
    }

    pub fn max_k(&self) -> usize {
        self.policy.max_k
    }

    pub fn kv_bytes_per_token(&self) -> usize {
        self.proposer.kv_bytes_per_token()
    }

    pub fn init_kv_cache(
        &mut self,
        num_pages: usize,
        page_size: usize,
    ) -> Result<(), BackendError> {
        self.proposer.init_kv_cache(num_pages, page_size)
    }

    /// The target pass of the step took `seconds` over `rows` tokens.
    pub fn record_target(&mut self, rows: usize, seconds: f64) {
        self.policy.record_target(rows, seconds);
    }

    /// Before the target pass: the proposer computes the step's prefill chunks, then the
    /// policy picks k and the decoding sequences that allow it get their drafts attached.
    pub fn prepare(
        &mut self,
        scheduler: &mut Scheduler,
        plan: &mut StepPlan,
        max_model_len: usize,
    ) -> Result<(), BackendError> {
        self.pending.clear();
        let is_decode =
            |c: &ScheduledChunk, s: &Sequence| c.len == 1 && c.start + 1 == s.tokens().len();
        if self.proposer.kv_bytes_per_token() > 0 {
            let running = scheduler.running();
            let prefill: Vec<&ScheduledChunk> = plan
                .chunks
                .iter()
                .filter(|c| !is_decode(c, &running[c.index]))
                .collect();
            let batch = scheduler.batch_of(prefill.iter().copied());
            self.proposer.observe(&batch)?;
            let advanced: Vec<(usize, usize, usize)> = prefill
                .iter()
                .map(|c| (c.index, c.start, c.start + c.len))
                .collect();
            drop(batch);
            for (index, start, end) in advanced {
                // Only a contiguous run of computed tokens counts.
                let sequence = &mut scheduler.running_all_mut()[index];
                if sequence.spec.draft_computed >= start {
                    sequence.spec.draft_computed = sequence.spec.draft_computed.max(end);
                }
            }
        }

        let running = scheduler.running();
        if !self.policy.fixed && plan.chunks.iter().any(|c| !is_decode(c, &running[c.index])) {
            // Prompt chunks share this step: verification rows would take token budget from
            // them and delay the new requests' first tokens, and a batch still filling up
            // finishes no sooner for its early members' speculation.
            return Ok(());
        }
        let over_limit = self
            .disable_by_batch_size
            .is_some_and(|limit| plan.chunks.len() > limit);
        if over_limit {
            return Ok(());
        }
        let candidates: Vec<usize> = plan
            .chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                let s = &scheduler.running()[c.index];
                // A prompt's last token is not drafted after: its first output carries the
                // prompt's facts, which only plain sampling sends.
                is_decode(c, s) && s.params.allow_speculation && s.prompt_info_sent()
            })
            .map(|(position, _)| position)
            .collect();
        let alphas: Vec<f64> = candidates
            .iter()
            .map(|&p| {
                scheduler.running()[plan.chunks[p].index]
                    .spec
                    .acceptance
                    .rate()
            })
            .collect();
        let other_rows = plan.num_tokens() - candidates.len();
        let k = self.policy.choose_k(&alphas, other_rows);
        if k == 0 {
            return Ok(());
        }
        let granted: Vec<(usize, usize)> = candidates
            .iter()
            .map(|&p| {
                let index = plan.chunks[p].index;
                let s = &scheduler.running()[index];
                // Drafts past the request's last token would be wasted work.
                let left = (s.params.max_tokens.saturating_sub(s.output().len()))
                    .min(max_model_len.saturating_sub(s.tokens().len()));
                let k = k.min(left.saturating_sub(1));
                (
                    p,
                    if k > 0 {
                        scheduler.reserve_drafts(plan, index, k)
                    } else {
                        0
                    },
                )
            })
            .filter(|&(_, g)| g > 0)
            .collect();
        if granted.is_empty() {
            return Ok(());
        }

        let started = Instant::now();
        let drafts = {
            let mut wanted: Vec<(usize, usize)> = granted
                .iter()
                .map(|&(p, g)| (plan.chunks[p].index, g))
                .collect();
            wanted.sort_unstable();
            let mut requests: Vec<DraftRequest<'_>> = Vec::with_capacity(wanted.len());
            let mut want = wanted.iter().peekable();
            for (index, sequence) in scheduler.running_all_mut().iter_mut().enumerate() {
                let Some(&&(wanted_index, g)) = want.peek() else {
                    break;
                };
                if wanted_index != index {
                    continue;
                }
                want.next();
                let draft_computed = sequence.spec.draft_computed;
                let parts = sequence.sampling_parts();
                requests.push(DraftRequest {
                    tokens: parts.tokens,
                    num_prompt_tokens: parts.num_prompt_tokens,
                    draft_computed,
                    block_table: parts.block_table,
                    params: parts.params,
                    k: g,
                    rng: parts.rng,
                });
            }
            let drafts = self.proposer.propose(&mut requests)?;
            wanted
                .into_iter()
                .map(|(index, _)| index)
                .zip(drafts)
                .collect::<Vec<_>>()
        };
        let per_step = self
            .proposer
            .step_seconds(started.elapsed().as_secs_f64(), k);
        if let Some(seconds) = per_step {
            self.policy.record_draft_step(drafts.len(), seconds);
        }

        for (index, d) in drafts {
            let Some(position) = plan.chunks.iter().position(|c| c.index == index) else {
                continue;
            };
            let mut chunk = plan.chunks[position];
            let id = chunk.id;
            scheduler.running_all_mut()[index].spec.draft_computed = d.draft_computed;
            if d.tokens.is_empty() {
                continue;
            }
            scheduler.attach_drafts(&mut chunk, &d.tokens);
            plan.chunks[position] = chunk;
            self.pending.push((id, d.q, d.tokens.len()));
        }
        Ok(())
    }

    /// After the target pass: which drafts of `sequence` (whose chunk's rows start at
    /// `first_row`) the target keeps, and the token after them.
    pub fn verify(
        &mut self,
        sequence: &mut Sequence,
        forward: &ForwardOutput,
        first_row: usize,
    ) -> Verdict {
        let q = self
            .pending
            .iter()
            .position(|p| p.0 == sequence.id)
            .map(|at| self.pending.swap_remove(at).1)
            .unwrap_or_default();
        let n = sequence.spec.num_drafts();
        let output_before = sequence.num_verified() - sequence.num_prompt_tokens;
        let parts = sequence.sampling_parts();
        let (prompt, rest) = parts.prompt_and_rest();
        let (params, rng) = (parts.params, parts.rng);
        let drafts = &rest[output_before..];
        let sampler = &mut self.sampler;
        let verdict = if is_greedy(params) || q.len() != n {
            verify_greedy(drafts, |j| {
                let output = &rest[..output_before + j];
                sampler.sample(forward.row(first_row + j), params, prompt, output, rng)
            })
        } else {
            verify_sampled(
                drafts,
                &q,
                |j| {
                    let output = &rest[..output_before + j];
                    sampler.distribution(forward.row(first_row + j), params, prompt, output)
                },
                rng,
            )
        };
        self.record(sequence, n, verdict.accepted);
        verdict
    }

    fn record(&mut self, sequence: &mut Sequence, drafted: usize, accepted: usize) {
        sequence.spec.record_round(drafted, accepted);
        let c = &mut self.counters;
        c.num_drafts += 1;
        c.num_draft_tokens += drafted as u64;
        c.num_accepted_tokens += accepted as u64;
        for slot in c.num_accepted_tokens_per_pos.iter_mut().take(accepted) {
            *slot += 1;
        }
    }
}
