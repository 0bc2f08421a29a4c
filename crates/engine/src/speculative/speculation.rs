//! Speculative decoding inside an engine step: before the target pass, draft tokens for the
//! decoding sequences and attach them to their chunks; after it, verify each sequence's drafts
//! against the target's rows.

use std::time::Instant;

use super::constrained::{ConstrainedRows, GrammarProgress};
use super::policy::SpecPolicy;
use super::prediction;
use super::proposer::{DraftRequest, Drafts, Proposer};
use super::verify::{verify_greedy, verify_sampled, Verdict};
use crate::backend::{Backend, BackendError, ForwardOutput};
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

    /// The model's EOS ids, which its target sampler holds back under `min_tokens` as the
    /// engine's own sampler does (set by `EngineCore::set_speculation`).
    pub fn set_eos_token_ids(&mut self, eos_token_ids: &[u32]) {
        self.sampler = Sampler::new(eos_token_ids);
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
        target: &mut dyn Backend,
    ) -> Result<(), BackendError> {
        self.pending.clear();
        if self.proposer.kv_bytes_per_token() > 0 {
            self.observe_prefills(scheduler, plan)?;
        }
        let Some((k, granted)) = self.grant(scheduler, plan, max_model_len) else {
            return Ok(());
        };
        let started = Instant::now();
        let drafts = self.propose(scheduler, &granted, target)?;
        let per_step = self
            .proposer
            .step_seconds(started.elapsed().as_secs_f64(), k);
        if let Some(seconds) = per_step {
            self.policy.record_draft_step(drafts.len(), seconds);
        }
        let mut drafts = drafts;
        if !self.policy.fixed {
            self.keep_what_pays(plan, &mut drafts);
        }
        for (index, d) in drafts {
            let Some(position) = plan.chunks.iter().position(|c| c.index == index) else {
                continue;
            };
            let mut chunk = plan.chunks[position];
            scheduler.running_all_mut()[index].spec.draft_computed = d.draft_computed;
            if d.tokens.is_empty() {
                continue;
            }
            scheduler.attach_drafts(&mut chunk, &d.tokens);
            plan.chunks[position] = chunk;
            self.pending.push((chunk.id, d.q, d.tokens.len()));
        }
        Ok(())
    }

    /// Drafts that come with their chances are cut to the number that maximizes the step's
    /// expected tokens per second, one sequence after another (each seeing the rows the
    /// earlier ones kept).
    fn keep_what_pays(&mut self, plan: &StepPlan, drafts: &mut [(usize, Drafts)]) {
        let mut rows = plan.num_tokens();
        let mut tokens = plan.chunks.len() as f64;
        let mut kept = 0;
        for (_, d) in drafts.iter_mut() {
            if d.chances.is_empty() {
                rows += d.tokens.len();
                continue;
            }
            let keep = self.policy.best_length(&d.chances, rows, tokens);
            d.tokens.truncate(keep);
            d.q.truncate(keep);
            d.chances.truncate(keep);
            rows += keep;
            kept += keep;
            tokens += d.chances.iter().sum::<f64>();
        }
        if self.proposer.scores_drafts() {
            // Every sequence asked counts, those offered nothing too.
            self.policy.record_scored_yield(kept, drafts.len());
        }
    }

    /// Request `id` is gone: the proposer may drop what it kept for it.
    pub fn finished(&mut self, id: RequestId) {
        self.proposer.finished(id);
    }

    /// A proposer with a cache computes this step's prefill chunks too, so that it knows the
    /// prompts when asked for drafts.
    fn observe_prefills(
        &mut self,
        scheduler: &mut Scheduler,
        plan: &StepPlan,
    ) -> Result<(), BackendError> {
        let running = scheduler.running();
        let prefill: Vec<&ScheduledChunk> = plan
            .chunks
            .iter()
            .filter(|c| !is_decode(c, &running[c.index]))
            .collect();
        let batch = scheduler.batch_of(prefill.iter().copied());
        self.proposer.observe(&batch)?;
        drop(batch);
        for chunk in prefill {
            let (start, end) = (chunk.start, chunk.start + chunk.len);
            // Only a contiguous run of computed tokens counts.
            let spec = &mut scheduler.running_all_mut()[chunk.index].spec;
            if spec.draft_computed >= start {
                spec.draft_computed = spec.draft_computed.max(end);
            }
        }
        Ok(())
    }

    /// Whether this step speculates, with how many drafts at most (`k`), and the room
    /// reserved for each decoding sequence that drafts: `(running index, drafts granted)`.
    fn grant(
        &mut self,
        scheduler: &mut Scheduler,
        plan: &StepPlan,
        max_model_len: usize,
    ) -> Option<(usize, Vec<(usize, usize)>)> {
        let running = scheduler.running();
        if !self.policy.fixed && plan.chunks.iter().any(|c| !is_decode(c, &running[c.index])) {
            // Prompt chunks share this step: verification rows would take token budget from
            // them and delay the new requests' first tokens, and a batch still filling up
            // finishes no sooner for its early members' speculation.
            return None;
        }
        let over_limit = self
            .disable_by_batch_size
            .is_some_and(|limit| plan.chunks.len() > limit);
        if over_limit {
            return None;
        }
        let candidates: Vec<usize> = plan
            .chunks
            .iter()
            .filter(|c| {
                let s = &running[c.index];
                // A prompt's last token is not drafted after: its first output carries the
                // prompt's facts, which only plain sampling sends.
                is_decode(c, s) && s.params.allow_speculation && s.prompt_info_sent()
            })
            .map(|c| c.index)
            .collect();
        let alphas: Vec<f64> = candidates
            .iter()
            .map(|&index| running[index].spec.acceptance.rate())
            .collect();
        let other_rows = plan.num_tokens() - candidates.len();
        let k = if self.proposer.scores_drafts() {
            // Its drafts carry their chances: ask for all, keep what pays (keep_what_pays).
            self.policy.cap_for_scored_drafts(plan.num_tokens())
        } else {
            self.policy.choose_k(&alphas, other_rows)
        };
        if k == 0 {
            return None;
        }
        let mut granted = Vec::with_capacity(candidates.len());
        let mut rows = plan.num_tokens();
        for index in candidates {
            let s = &scheduler.running()[index];
            // Drafts past the request's last token would be wasted work.
            let left = (s.params.max_tokens.saturating_sub(s.output().len()))
                .min(max_model_len.saturating_sub(s.tokens().len()));
            let wanted = k.min(left.saturating_sub(1));
            if wanted > 0 {
                let room = scheduler.reserve_drafts(rows, index, wanted);
                if room > 0 {
                    granted.push((index, room));
                    rows += room;
                }
            }
        }
        (!granted.is_empty()).then_some((k, granted))
    }

    /// Asks the proposer for the granted drafts, in running order; a request with a predicted
    /// output drafts from it instead (`prediction`).
    fn propose(
        &mut self,
        scheduler: &mut Scheduler,
        granted: &[(usize, usize)],
        target: &mut dyn Backend,
    ) -> Result<Vec<(usize, Drafts)>, BackendError> {
        let mut wanted = granted.to_vec();
        wanted.sort_unstable();
        let mut want = wanted.iter().peekable();
        let mut requests: Vec<DraftRequest<'_>> = Vec::with_capacity(wanted.len());
        // (running index, its drafts) of the requests that draft from their prediction.
        let mut predicted: Vec<(usize, Drafts)> = Vec::new();
        for (index, sequence) in scheduler.running_all_mut().iter_mut().enumerate() {
            let Some(&&(wanted_index, k)) = want.peek() else {
                break;
            };
            if wanted_index != index {
                continue;
            }
            want.next();
            if let Some(prediction) = &sequence.params.prediction {
                let tokens = prediction::propose(sequence.output(), prediction, k);
                predicted.push((
                    index,
                    Drafts {
                        q: tokens.iter().map(|&t| Distribution::point(t)).collect(),
                        tokens,
                        draft_computed: sequence.spec.draft_computed,
                        chances: Vec::new(),
                    },
                ));
                continue;
            }
            let (id, draft_computed) = (sequence.id, sequence.spec.draft_computed);
            let state_slot = sequence.state_slot;
            let parts = sequence.sampling_parts();
            requests.push(DraftRequest {
                id,
                tokens: parts.tokens,
                num_prompt_tokens: parts.num_prompt_tokens,
                draft_computed,
                block_table: parts.block_table,
                state_slot,
                params: parts.params,
                k,
                rng: parts.rng,
            });
        }
        let drafts = self.proposer.propose(&mut requests, target)?;
        let mut proposed = drafts.into_iter();
        let mut predicted = predicted.into_iter().peekable();
        let mut all = Vec::with_capacity(wanted.len());
        for &(index, _) in &wanted {
            let from_prediction = predicted.next_if(|(at, _)| *at == index);
            match from_prediction {
                Some((_, drafts)) => all.push((index, drafts)),
                None => all.extend(proposed.next().map(|drafts| (index, drafts))),
            }
        }
        Ok(all)
    }

    /// After the target pass: which drafts of `sequence` (whose chunk's rows start at
    /// `first_row`) the target keeps, and the token after them; under a constraint, the target
    /// rows are masked by the grammar, which takes the kept drafts as it goes
    /// ([`ConstrainedRows`]), and what it made of them.
    ///
    /// Requests with logit rules (`logit_bias`, `min_tokens`, `allowed_token_ids`,
    /// `bad_words`) are speculated for too: the target distribution at draft position `j` is
    /// the sampler's, which applies the rules after the output up to `j` (the drafts before it
    /// included), so a draft they forbid has probability 0 and is rejected, and the output is
    /// distributed as without drafts (greedy: token for token the same).
    pub fn verify(
        &mut self,
        sequence: &mut Sequence,
        forward: &ForwardOutput,
        first_row: usize,
        eos_token_ids: &[u32],
    ) -> (Verdict, GrammarProgress) {
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
        let end_ids = params.end_token_ids(eos_token_ids);
        let mut rows = ConstrainedRows::new(parts.constraint, drafts, end_ids, forward, first_row);
        let sampler = &mut self.sampler;
        let verdict = if is_greedy(params) || q.len() != n {
            verify_greedy(drafts, |j| {
                let output = &rest[..output_before + j];
                sampler.sample(&rows.row(j), params, prompt, output, rng)
            })
        } else {
            verify_sampled(
                drafts,
                &q,
                |j| {
                    let output = &rest[..output_before + j];
                    sampler.distribution(&rows.row(j), params, prompt, output)
                },
                rng,
            )
        };
        let progress = rows.progress;
        self.record(sequence, n, verdict.accepted);
        (verdict, progress)
    }

    fn record(&mut self, sequence: &mut Sequence, drafted: usize, accepted: usize) {
        sequence.spec.record_round(drafted, accepted);
        self.proposer.verdict(sequence.id, drafted, accepted);
        let c = &mut self.counters;
        c.num_drafts += 1;
        c.num_draft_tokens += drafted as u64;
        c.num_accepted_tokens += accepted as u64;
        for slot in c.num_accepted_tokens_per_pos.iter_mut().take(accepted) {
            *slot += 1;
        }
    }
}

/// A chunk that runs one token, the sequence's last: a decode.
fn is_decode(chunk: &ScheduledChunk, sequence: &Sequence) -> bool {
    chunk.len == 1 && chunk.start + 1 == sequence.tokens().len()
}
