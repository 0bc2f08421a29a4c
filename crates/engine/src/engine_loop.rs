//! The scheduler thread: commands in, one [`EngineStep`] per step out.
//!
//! [`EngineCore`] is one step of work, testable without threads: plan (the scheduler), draft
//! (speculation, when on), run the forward pass ([`crate::forward`]), commit its result
//! ([`crate::commit`]). [`run`] is the loop around it that the scheduler thread executes.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod mask_prefetch;

use crate::admission;
use crate::backend::Backend;
use crate::commit::{commit_step, CommitContext};
use crate::forward::{check_shape, device_sampling, forward_catching_panics};
use crate::kv::KvEventSink;
use crate::request::{EngineOutput, EngineStep, FinishReason, GenerationRequest, RequestId};
use crate::sampler::Sampler;
use crate::scheduler::{Scheduler, StepPlan};
use crate::sequence::Sequence;
use crate::speculative::Speculation;
use crate::stats::{EngineStats, Occupancy, StepStats};

/// What the handle sends the scheduler thread.
#[derive(Debug)]
pub enum EngineCommand {
    /// Boxed: a request (its sampling parameters) is far larger than the other commands.
    Add(Box<GenerationRequest>),
    Abort(RequestId),
    /// Report the prefix cache's stored and evicted blocks from now on.
    SetKvEventSink(Box<dyn KvEventSink>),
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
            sampler: Sampler::new(&eos_token_ids),
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
    pub fn set_speculation(&mut self, mut speculation: Speculation) {
        speculation.set_eos_token_ids(&self.eos_token_ids);
        self.scheduler
            .set_draft_cache(speculation.kv_bytes_per_token() > 0);
        self.stats.speculation.enable(speculation.max_k());
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
            EngineCommand::Add(request) => self.add_request(*request),
            EngineCommand::Abort(id) => self.abort(id),
            EngineCommand::SetKvEventSink(sink) => self.scheduler.kv_mut().set_event_sink(sink),
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
        let refusal = admission::refusal(&request, self.backend.vocab_size(), self.max_model_len);
        let mut sequence = Sequence::new(request);
        match refusal {
            Some((why, finish)) => {
                tracing::warn!(id = sequence.id, why, "request finished on arrival");
                self.pending.push(sequence.final_output(finish));
            }
            None => self.scheduler.add(sequence),
        }
        self.publish_stats();
    }

    pub fn abort(&mut self, id: RequestId) {
        if let Some(mut sequence) = self.scheduler.remove(id) {
            self.pending
                .push(sequence.final_output(FinishReason::Abort));
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
        self.stats.count_plan(&plan.counters);
        let mut stats = None;
        if !plan.chunks.is_empty() {
            let speculating = self.speculation.is_some();
            let draft_started = Instant::now();
            self.draft(&mut plan);
            let draft_done = Instant::now();
            // After drafting: chunks that score drafts need their logits on the host.
            let sampling = device_sampling(
                self.backend.as_ref(),
                &plan,
                self.scheduler.running(),
                &self.eos_token_ids,
            );
            let vocab_size = self.backend.vocab_size();
            let masks = mask_prefetch::due_jobs(
                &plan,
                self.scheduler.running(),
                vocab_size,
                &self.eos_token_ids,
            );
            let batch = self.scheduler.batch(&plan);
            let forward_started = Instant::now();
            let backend = self.backend.as_mut();
            let result = std::thread::scope(|scope| {
                let workers = mask_prefetch::spawn(scope, masks);
                let result = forward_catching_panics(backend, &batch, &sampling);
                for worker in workers {
                    // A panicked job poisoned its constraint: the commit fails that one.
                    let _ = worker.join();
                }
                result
            });
            drop(batch);
            let forward_done = Instant::now();
            match result.and_then(|step| check_shape(&plan, step, self.backend.vocab_size())) {
                Ok(step) => {
                    self.commit(&plan, &step, &mut outputs);
                    // What a step of this many rows costs, as the policy must weigh it: the
                    // pass and the commit (verification reads every scored row on the host,
                    // where plain steps on a GPU sample on the device).
                    if let Some(speculation) = &mut self.speculation {
                        let seconds = (Instant::now() - forward_started).as_secs_f64();
                        speculation.record_target(plan.num_tokens(), seconds);
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "forward pass failed; aborting the requests of its batch");
                    for chunk in &plan.chunks {
                        if let Some(mut sequence) = self.scheduler.remove(chunk.id) {
                            outputs.push(sequence.final_output(FinishReason::Abort));
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
                    Duration::ZERO
                },
                forward: forward_done - forward_started,
                sample: forward_done.elapsed(),
                num_tokens: plan.num_tokens(),
                num_seqs: plan.chunks.len(),
            });
        }
        if let Some(speculation) = &mut self.speculation {
            for output in outputs.iter().filter(|o| o.finish.is_some()) {
                speculation.finished(output.id);
            }
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
        let target = self.backend.as_mut();
        if let Err(error) =
            speculation.prepare(&mut self.scheduler, plan, self.max_model_len, target)
        {
            tracing::error!(%error, "speculative proposer failed; speculation is off from now on");
            self.speculation = None;
        }
    }

    fn commit(
        &mut self,
        plan: &StepPlan,
        step: &crate::backend::SampledOutput,
        outputs: &mut Vec<EngineOutput>,
    ) {
        let ctx = CommitContext {
            scheduler: &mut self.scheduler,
            speculation: self.speculation.as_mut(),
            sampler: &mut self.sampler,
            eos_token_ids: &self.eos_token_ids,
            max_model_len: self.max_model_len,
            stats: &self.stats,
        };
        commit_step(ctx, plan, step, outputs);
    }

    fn publish_stats(&self) {
        let kv = self.scheduler.kv();
        let occupancy = Occupancy {
            num_running: self.scheduler.num_running(),
            num_waiting: self.scheduler.num_waiting(),
            kv_pages_total: kv.num_pages(),
            kv_pages_used: kv.num_referenced(),
            window_pages_total: kv.window_pages().map_or(0, |w| w.num_pages() - 1),
            window_pages_used: kv.window_pages().map_or(0, |w| w.num_in_use()),
        };
        let counters = self.speculation.as_ref().map(|s| &s.counters);
        self.stats.publish(occupancy, counters);
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

#[cfg(test)]
mod tests;
