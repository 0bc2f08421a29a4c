//! The scheduler thread: commands in, one [`EngineStep`] per step out.
//!
//! [`EngineCore`] is one step of work (schedule, forward, sample, finish), testable without
//! threads; [`run`] is the loop around it that the scheduler thread executes.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use crate::backend::{
    Backend, BackendError, DeviceSampling, ForwardOutput, LogitsRequest, SampledOutput, SeqBatch,
};
use crate::handle::EngineStats;
use crate::request::{
    EngineOutput, EngineStep, FinishReason, GenerationRequest, PromptInfo, RequestId, SpecSummary,
    StepStats,
};
use crate::sampler::{has_penalties, token_logprob, Sampler};
use crate::scheduler::{ScheduledChunk, Scheduler, StepPlan};
use crate::sequence::Sequence;
use crate::spec::Speculation;

/// What the handle sends the scheduler thread.
#[derive(Debug)]
pub enum EngineCommand {
    Add(GenerationRequest),
    Abort(RequestId),
}

pub struct EngineCore {
    scheduler: Scheduler,
    backend: Box<dyn Backend>,
    sampler: Sampler,
    eos_token_ids: Vec<u32>,
    max_model_len: usize,
    stats: Arc<EngineStats>,
    /// Outputs produced outside a step (aborts, requests finished on arrival).
    pending: Vec<EngineOutput>,
    /// Speculative decoding, when configured.
    speculation: Option<Speculation>,
}

impl EngineCore {
    pub fn new(
        scheduler: Scheduler,
        backend: Box<dyn Backend>,
        eos_token_ids: Vec<u32>,
        max_model_len: usize,
        stats: Arc<EngineStats>,
    ) -> Self {
        let core = Self {
            scheduler,
            backend,
            sampler: Sampler::default(),
            eos_token_ids,
            max_model_len,
            stats,
            pending: Vec::new(),
            speculation: None,
        };
        core.publish_stats();
        core
    }

    /// Decode speculatively from now on (its KV cache, if any, must be initialised).
    pub fn set_speculation(&mut self, speculation: Speculation) {
        self.scheduler
            .set_draft_cache(speculation.kv_bytes_per_token() > 0);
        let spec = &self.stats.speculation;
        spec.enabled.store(true, Ordering::Relaxed);
        spec.num_tokens
            .store(speculation.max_k(), Ordering::Relaxed);
        self.speculation = Some(speculation);
    }

    pub fn speculation(&self) -> Option<&Speculation> {
        self.speculation.as_ref()
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The effective context limit (prompt + output).
    pub fn max_model_len(&self) -> usize {
        self.max_model_len
    }

    /// Work is queued or running, or outputs wait to be sent.
    pub fn has_work(&self) -> bool {
        self.scheduler.has_work() || !self.pending.is_empty()
    }

    pub fn handle(&mut self, command: EngineCommand) {
        match command {
            EngineCommand::Add(request) => self.add_request(request),
            EngineCommand::Abort(id) => self.abort(id),
        }
    }

    pub fn add_request(&mut self, request: GenerationRequest) {
        if self.scheduler.contains(request.id) {
            tracing::error!(
                id = request.id,
                "request id already live; duplicate dropped"
            );
            return;
        }
        let vocab = self.backend.vocab_size();
        let refusal = if request.prompt.is_empty() {
            Some(("empty prompt", FinishReason::Abort))
        } else if request.prompt.iter().any(|&t| t as usize >= vocab) {
            Some((
                "prompt token id outside the vocabulary",
                FinishReason::Abort,
            ))
        } else if request.prompt.len() >= self.max_model_len {
            Some(("prompt leaves no room in the context", FinishReason::Length))
        } else if request.params.max_tokens == 0 {
            Some(("max_tokens is 0", FinishReason::Length))
        } else {
            None
        };
        let mut sequence = Sequence::new(request);
        match refusal {
            Some((why, finish)) => {
                tracing::warn!(id = sequence.id, why, "request finished on arrival");
                self.pending.push(final_output(&mut sequence, finish));
            }
            None => self.scheduler.add(sequence),
        }
        self.publish_stats();
    }

    pub fn abort(&mut self, id: RequestId) {
        if let Some(mut sequence) = self.scheduler.remove(id) {
            self.pending
                .push(final_output(&mut sequence, FinishReason::Abort));
        }
        self.publish_stats();
    }

    /// Run one step and return everything produced since the last one.
    pub fn step(&mut self) -> Vec<EngineOutput> {
        self.step_with_stats().outputs
    }

    /// [`Self::step`], with where its time went (what the scheduler thread sends).
    pub fn step_with_stats(&mut self) -> EngineStep {
        let started = Instant::now();
        let mut outputs = std::mem::take(&mut self.pending);
        let mut plan = self.scheduler.schedule();
        self.count(&plan);
        let mut stats = None;
        if !plan.chunks.is_empty() {
            let speculating = self.speculation.is_some();
            let draft_started = Instant::now();
            self.draft(&mut plan);
            let draft_done = Instant::now();
            // After drafting: chunks that score drafts need their logits on the host.
            let sampling = self.device_sampling(&plan);
            let (result, forward_started) = {
                let batch = self.scheduler.batch(&plan);
                let forward_started = Instant::now();
                let result = forward_catching_panics(self.backend.as_mut(), &batch, &sampling);
                (result, forward_started)
            };
            let forward_done = Instant::now();
            if let Some(speculation) = &mut self.speculation {
                let seconds = (forward_done - forward_started).as_secs_f64();
                speculation.record_target(plan.num_tokens(), seconds);
            }
            match result.and_then(|step| check_shape(&plan, step, self.backend.vocab_size())) {
                Ok(step) => self.finish_step(&plan, &step, &mut outputs),
                Err(error) => {
                    tracing::error!(%error, "forward pass failed; aborting the requests of its batch");
                    for chunk in &plan.chunks {
                        if let Some(mut sequence) = self.scheduler.remove(chunk.id) {
                            outputs.push(final_output(&mut sequence, FinishReason::Abort));
                        }
                    }
                }
            }
            self.stats.steps_total.fetch_add(1, Ordering::Relaxed);
            stats = Some(StepStats {
                // Building the batch and the device-sampling list count as scheduling.
                schedule: (draft_started - started) + (forward_started - draft_done),
                draft: if speculating {
                    draft_done - draft_started
                } else {
                    std::time::Duration::ZERO
                },
                forward: forward_done - forward_started,
                sample: forward_done.elapsed(),
                num_tokens: plan.num_tokens(),
                num_seqs: plan.chunks.len(),
            });
        }
        let at = Instant::now();
        self.publish_stats();
        EngineStep { outputs, stats, at }
    }

    /// Speculative drafts for this step's decodes. A failing proposer turns speculation off
    /// (plain decoding stays correct; its cache may not be).
    fn draft(&mut self, plan: &mut StepPlan) {
        let Some(speculation) = &mut self.speculation else {
            return;
        };
        if let Err(error) = speculation.prepare(&mut self.scheduler, plan, self.max_model_len) {
            tracing::error!(%error, "speculative proposer failed; speculation is off from now on");
            self.speculation = None;
        }
    }

    /// Which sequences of the plan the backend samples itself: those whose next token is due
    /// and needs no host state (no penalties, no logprobs). Empty when the backend cannot.
    fn device_sampling(&self, plan: &StepPlan) -> Vec<Option<DeviceSampling>> {
        if !self.backend.can_sample() {
            return Vec::new();
        }
        let running = self.scheduler.running();
        plan.chunks
            .iter()
            .map(|chunk| {
                let sequence = &running[chunk.index];
                let params = &sequence.params;
                let delegable = chunk.logits == LogitsRequest::Last
                    && !has_penalties(params)
                    && params.logprobs.is_none();
                delegable.then(|| DeviceSampling {
                    temperature: params.temperature,
                    top_k: params.top_k.min(u32::MAX as usize) as u32,
                    top_p: params.top_p,
                    min_p: params.min_p,
                    seed: sequence.device_seed,
                    counter: sequence.output().len() as u64,
                })
            })
            .collect()
    }

    fn finish_step(&mut self, plan: &StepPlan, step: &SampledOutput, out: &mut Vec<EngineOutput>) {
        self.scheduler.complete(plan);
        let forward = &step.forward;
        let mut row = 0;
        let mut finished = Vec::new();
        for (i, chunk) in plan.chunks.iter().enumerate() {
            let device_token = step.tokens.get(i).copied().flatten();
            let rows = if device_token.is_some() {
                0
            } else {
                num_rows(chunk)
            };
            let first_row = row;
            row += rows;
            if chunk.drafts > 0 {
                let output = self.finish_drafted(chunk, forward, first_row);
                if output.finish.is_some() {
                    finished.push(output.id);
                }
                out.push(output);
                continue;
            }
            let sequence = self.scheduler.running_mut(chunk.index);
            if chunk.logits == LogitsRequest::All {
                gather_prompt_logprobs(sequence, chunk, forward, first_row);
            }
            let next = match device_token {
                Some(token) => Next::Sampled(token),
                None if rows > 0 => Next::Logits(forward.row(first_row + rows - 1)),
                None => continue,
            };
            if chunk.start + chunk.len != sequence.tokens.len() {
                continue;
            }
            let output = sample_next(
                &mut self.sampler,
                sequence,
                next,
                &self.eos_token_ids,
                self.max_model_len,
            );
            self.stats
                .generation_tokens_total
                .fetch_add(1, Ordering::Relaxed);
            if output.finish.is_some() {
                finished.push(sequence.id);
            }
            if output.prompt.is_some() {
                self.stats
                    .prompt_tokens_total
                    .fetch_add(sequence.num_prompt_tokens as u64, Ordering::Relaxed);
            }
            out.push(output);
        }
        for id in finished {
            self.scheduler.remove(id);
        }
    }

    /// A chunk that scored drafts: verify them, keep what the target accepts, and emit the
    /// accepted drafts and the token after them (up to a finish).
    fn finish_drafted(
        &mut self,
        chunk: &ScheduledChunk,
        forward: &ForwardOutput,
        first_row: usize,
    ) -> EngineOutput {
        let verdict = match &mut self.speculation {
            Some(speculation) => {
                let sequence = self.scheduler.running_mut(chunk.index);
                speculation.verify(sequence, forward, first_row)
            }
            // Unreachable in practice (drafts only come from a speculation); rejecting them
            // all and sampling from the first row is still exact.
            None => {
                let sequence = self.scheduler.running_mut(chunk.index);
                let params = sequence.params.clone();
                let len = sequence.tokens.len() - sequence.num_drafts;
                let (prompt, output) = sequence.tokens[..len].split_at(sequence.num_prompt_tokens);
                let next = self.sampler.sample(
                    forward.row(first_row),
                    &params,
                    prompt,
                    output,
                    &mut sequence.rng,
                );
                crate::spec::Verdict { accepted: 0, next }
            }
        };
        self.scheduler.settle_drafts(chunk.index, verdict.accepted);
        let sequence = self.scheduler.running_mut(chunk.index);
        let base = sequence.tokens.len() - verdict.accepted;
        let mut emitted: Vec<u32> = sequence.tokens.split_off(base);
        emitted.push(verdict.next);
        let mut output = EngineOutput {
            id: sequence.id,
            prompt: None,
            tokens: Vec::with_capacity(emitted.len()),
            logprobs: Vec::new(),
            finish: None,
            speculation: None,
        };
        for (j, token) in emitted.into_iter().enumerate() {
            sequence.tokens.push(token);
            output.tokens.push(token);
            if let Some(top_n) = sequence.params.logprobs {
                output
                    .logprobs
                    .push(token_logprob(forward.row(first_row + j), token, top_n));
            }
            output.finish = finish_reason(sequence, token, &self.eos_token_ids, self.max_model_len);
            if output.finish.is_some() {
                output.speculation = spec_summary(sequence);
                break;
            }
        }
        self.stats
            .generation_tokens_total
            .fetch_add(output.tokens.len() as u64, Ordering::Relaxed);
        output
    }

    fn count(&self, plan: &StepPlan) {
        let c = plan.counters;
        let stats = &self.stats;
        stats
            .prefix_cache_queries_total
            .fetch_add(c.prefix_queried_tokens, Ordering::Relaxed);
        stats
            .prefix_cache_hits_total
            .fetch_add(c.prefix_hit_tokens, Ordering::Relaxed);
        stats
            .num_preemptions_total
            .fetch_add(c.preemptions, Ordering::Relaxed);
    }

    fn publish_stats(&self) {
        let stats = &self.stats;
        if let Some(speculation) = &self.speculation {
            let (c, s) = (&speculation.counters, &stats.speculation);
            s.num_drafts.store(c.num_drafts, Ordering::Relaxed);
            s.num_draft_tokens
                .store(c.num_draft_tokens, Ordering::Relaxed);
            s.num_accepted_tokens
                .store(c.num_accepted_tokens, Ordering::Relaxed);
            for (slot, &v) in s
                .num_accepted_tokens_per_pos
                .iter()
                .zip(&c.num_accepted_tokens_per_pos)
            {
                slot.store(v, Ordering::Relaxed);
            }
        }
        let kv = self.scheduler.kv();
        stats
            .num_running
            .store(self.scheduler.num_running(), Ordering::Relaxed);
        stats
            .num_waiting
            .store(self.scheduler.num_waiting(), Ordering::Relaxed);
        stats
            .kv_pages_total
            .store(kv.num_pages(), Ordering::Relaxed);
        stats
            .kv_pages_used
            .store(kv.num_referenced(), Ordering::Relaxed);
    }
}

/// Runs the step on the backend: `forward_sampled` when some sequence is sampled there, plain
/// `forward` otherwise. A panicking backend must not take the scheduler thread (and every
/// request) down with it: its batch fails like any backend error.
fn forward_catching_panics(
    backend: &mut dyn Backend,
    batch: &[SeqBatch<'_>],
    sampling: &[Option<DeviceSampling>],
) -> Result<SampledOutput, BackendError> {
    let run = || {
        if sampling.iter().any(Option::is_some) {
            backend.forward_sampled(batch, sampling)
        } else {
            backend.forward(batch).map(|forward| SampledOutput {
                forward,
                tokens: vec![None; batch.len()],
            })
        }
    };
    std::panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(BackendError(format!("backend panicked: {message}")))
    })
}

fn num_rows(chunk: &ScheduledChunk) -> usize {
    match chunk.logits {
        LogitsRequest::None => 0,
        LogitsRequest::Last => 1,
        LogitsRequest::All => chunk.len,
    }
}

/// A backend that returns the wrong number of rows, or a token outside the vocabulary, would
/// make us emit garbage: refuse it.
fn check_shape(
    plan: &StepPlan,
    step: SampledOutput,
    vocab_size: usize,
) -> Result<SampledOutput, BackendError> {
    if step.tokens.len() != plan.chunks.len() {
        return Err(BackendError(format!(
            "backend returned {} token slots for {} sequences",
            step.tokens.len(),
            plan.chunks.len()
        )));
    }
    if let Some(bad) = step
        .tokens
        .iter()
        .flatten()
        .find(|&&t| t as usize >= vocab_size)
    {
        return Err(BackendError(format!(
            "backend sampled token {bad} outside the vocabulary ({vocab_size})"
        )));
    }
    let expected: usize = plan
        .chunks
        .iter()
        .zip(&step.tokens)
        .filter(|(_, token)| token.is_none())
        .map(|(chunk, _)| num_rows(chunk))
        .sum();
    let forward = &step.forward;
    // With no rows asked for, an empty output of any stated width will do.
    let width_ok = forward.vocab_size == vocab_size || expected == 0;
    if !width_ok || forward.logits.len() != expected * vocab_size {
        return Err(BackendError(format!(
            "forward returned {} logits of vocab {}, expected {expected} rows of {vocab_size}",
            forward.logits.len(),
            forward.vocab_size
        )));
    }
    Ok(step)
}

/// Where a sequence's next token comes from.
#[derive(Clone, Copy)]
enum Next<'a> {
    /// A logits row: the host sampler picks.
    Logits(&'a [f32]),
    /// The backend already picked.
    Sampled(u32),
}

/// Row `j` of an `All` chunk predicts token `start + j + 1`: record it while that is a prompt token.
fn gather_prompt_logprobs(
    sequence: &mut Sequence,
    chunk: &ScheduledChunk,
    forward: &ForwardOutput,
    first_row: usize,
) {
    let top_n = sequence.params.prompt_logprobs.unwrap_or(0);
    if chunk.start == 0 {
        sequence.prompt_logprobs.clear();
        sequence.prompt_logprobs.push(None);
    }
    for j in 0..chunk.len {
        let next = chunk.start + j + 1;
        if next < sequence.num_prompt_tokens {
            let logits = forward.row(first_row + j);
            let entry = token_logprob(logits, sequence.tokens[next], top_n);
            sequence.prompt_logprobs.push(Some(entry));
        }
    }
}

/// Sample the next token of a sequence whose last token was just computed, and decide finish.
fn sample_next(
    sampler: &mut Sampler,
    sequence: &mut Sequence,
    next: Next<'_>,
    eos_token_ids: &[u32],
    max_model_len: usize,
) -> EngineOutput {
    let (prompt, output) = sequence.tokens.split_at(sequence.num_prompt_tokens);
    let token = match next {
        Next::Logits(logits) => {
            sampler.sample(logits, &sequence.params, prompt, output, &mut sequence.rng)
        }
        Next::Sampled(token) => token,
    };
    // Logprobs are never delegated to the backend, so a request that wants them has a row.
    let logprobs = match (sequence.params.logprobs, next) {
        (Some(top_n), Next::Logits(logits)) => vec![token_logprob(logits, token, top_n)],
        _ => Vec::new(),
    };
    sequence.tokens.push(token);
    let finish = finish_reason(sequence, token, eos_token_ids, max_model_len);
    EngineOutput {
        id: sequence.id,
        prompt: take_prompt_info(sequence),
        tokens: vec![token],
        logprobs,
        finish,
        speculation: finish.and(spec_summary(sequence)),
    }
}

/// How speculation went for `sequence`, if it ever speculated.
fn spec_summary(sequence: &Sequence) -> Option<SpecSummary> {
    (sequence.spec_rounds > 0).then_some(SpecSummary {
        rounds: sequence.spec_rounds,
        drafted: sequence.drafted_total,
        accepted: sequence.accepted_total,
    })
}

/// Whether `token`, just appended to `sequence`, ends it.
fn finish_reason(
    sequence: &Sequence,
    token: u32,
    eos_token_ids: &[u32],
    max_model_len: usize,
) -> Option<FinishReason> {
    let params = &sequence.params;
    if (!params.ignore_eos && eos_token_ids.contains(&token))
        || params.stop_token_ids.contains(&token)
    {
        Some(FinishReason::Stop)
    } else if sequence.output().len() >= params.max_tokens || sequence.tokens.len() >= max_model_len
    {
        Some(FinishReason::Length)
    } else {
        None
    }
}

/// The request's `PromptInfo`, the first time it is asked for.
fn take_prompt_info(sequence: &mut Sequence) -> Option<PromptInfo> {
    if sequence.prompt_info_sent {
        return None;
    }
    sequence.prompt_info_sent = true;
    let complete = sequence.prompt_logprobs.len() == sequence.num_prompt_tokens;
    let prompt_logprobs = match sequence.params.prompt_logprobs {
        Some(_) if complete => Some(std::mem::take(&mut sequence.prompt_logprobs)),
        _ => None,
    };
    Some(PromptInfo {
        num_prompt_tokens: sequence.num_prompt_tokens,
        num_cached_tokens: sequence.num_cached_tokens,
        prompt_logprobs,
        arrival: sequence.arrival,
        scheduled_at: sequence.scheduled_at,
    })
}

/// The last output of a request that ends without a new token.
fn final_output(sequence: &mut Sequence, finish: FinishReason) -> EngineOutput {
    EngineOutput {
        id: sequence.id,
        prompt: take_prompt_info(sequence),
        tokens: Vec::new(),
        logprobs: Vec::new(),
        finish: Some(finish),
        speculation: spec_summary(sequence),
    }
}

/// The scheduler thread's body: block on commands when idle, drain them without blocking
/// while there is work, one step at a time. Ends when every handle and the output receiver
/// are gone, or when the output receiver is gone.
pub fn run(mut core: EngineCore, commands: Receiver<EngineCommand>, outputs: Sender<EngineStep>) {
    let mut handles_alive = true;
    loop {
        if !core.has_work() {
            if !handles_alive {
                return;
            }
            match commands.recv() {
                Ok(command) => core.handle(command),
                Err(_) => return,
            }
        }
        while handles_alive {
            match commands.try_recv() {
                Ok(command) => core.handle(command),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => handles_alive = false,
            }
        }
        let step = core.step_with_stats();
        // A step that neither ran the model nor finished anything has nothing to tell.
        let worth_sending = !step.outputs.is_empty() || step.stats.is_some();
        if worth_sending && outputs.send(step).is_err() {
            tracing::info!("output receiver gone; scheduler thread stops");
            return;
        }
    }
}
