//! The scheduling policy: which tokens of which sequences run in the next step.
//!
//! Continuous batching under a per-step token budget: decodes first (one token each, so a long
//! prompt never starves them), then chunks of prompts already running, then FCFS admission of
//! waiting requests while the pool holds their whole remaining prompt. A running sequence that
//! needs a page when none can be had preempts the newest running sequence by recompute.
//! Pure: no threads, no tensors; the engine loop drives it.

use std::collections::VecDeque;
use std::time::Instant;

use crate::backend::{LogitsRequest, SeqBatch};
use crate::kv::KvManager;
use crate::request::RequestId;
use crate::sequence::Sequence;

#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
}

/// One sequence's work in a step: `tokens[start..start + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledChunk {
    pub id: RequestId,
    /// Index into the running list, valid until the step is completed.
    pub index: usize,
    pub start: usize,
    pub len: usize,
    pub logits: LogitsRequest,
}

/// What admission learned about the prefix cache, for the engine's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StepCounters {
    pub prefix_queried_tokens: u64,
    pub prefix_hit_tokens: u64,
    pub preemptions: u64,
}

#[derive(Debug, Default)]
pub struct StepPlan {
    pub chunks: Vec<ScheduledChunk>,
    pub counters: StepCounters,
}

impl StepPlan {
    pub fn num_tokens(&self) -> usize {
        self.chunks.iter().map(|c| c.len).sum()
    }
}

pub struct Scheduler {
    config: SchedulerConfig,
    kv: KvManager,
    waiting: VecDeque<Sequence>,
    /// In admission order: the last one is the newest (the preemption victim).
    running: Vec<Sequence>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig, kv: KvManager) -> Self {
        Self {
            config,
            kv,
            waiting: VecDeque::new(),
            running: Vec::new(),
        }
    }

    pub fn kv(&self) -> &KvManager {
        &self.kv
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    pub fn contains(&self, id: RequestId) -> bool {
        self.running.iter().chain(&self.waiting).any(|s| s.id == id)
    }

    pub fn add(&mut self, sequence: Sequence) {
        self.waiting.push_back(sequence);
    }

    /// Waiting requests, the next to admit first.
    pub fn waiting(&self) -> impl Iterator<Item = &Sequence> {
        self.waiting.iter()
    }

    pub fn running(&self) -> &[Sequence] {
        &self.running
    }

    pub fn running_mut(&mut self, index: usize) -> &mut Sequence {
        &mut self.running[index]
    }

    /// Take a sequence out (finished or aborted) and release its pages.
    pub fn remove(&mut self, id: RequestId) -> Option<Sequence> {
        if let Some(at) = self.running.iter().position(|s| s.id == id) {
            let mut sequence = self.running.remove(at);
            self.kv.release(&std::mem::take(&mut sequence.block_table));
            return Some(sequence);
        }
        let at = self.waiting.iter().position(|s| s.id == id)?;
        self.waiting.remove(at)
    }

    /// Plan the next step.
    pub fn schedule(&mut self) -> StepPlan {
        let mut plan = StepPlan::default();
        let mut budget = self.config.max_num_batched_tokens;

        let decodes = self.running.iter().filter(|s| s.num_pending() == 1);
        let prefills = self.running.iter().filter(|s| s.num_pending() > 1);
        let order: Vec<RequestId> = decodes.chain(prefills).map(|s| s.id).collect();
        for id in order {
            if budget == 0 {
                break;
            }
            // Gone if an earlier sequence of this step preempted it.
            let Some(index) = self.running.iter().position(|s| s.id == id) else {
                continue;
            };
            let len = self.running[index].num_pending().min(budget);
            if self.grow_or_preempt(index, len, &mut plan, &mut budget) {
                let chunk = self.chunk(index, len);
                plan.chunks.push(chunk);
                budget -= len;
            }
        }

        // Admitting right after a preemption would only thrash the pool.
        if plan.counters.preemptions == 0 {
            self.admit(&mut plan, &mut budget);
        }
        plan
    }

    /// Make room for `len` more tokens of running sequence `index`, preempting the newest
    /// running sequences while pages are short. False when `index` itself was preempted.
    fn grow_or_preempt(
        &mut self,
        index: usize,
        len: usize,
        plan: &mut StepPlan,
        budget: &mut usize,
    ) -> bool {
        loop {
            let sequence = &self.running[index];
            let needed = self
                .kv
                .pages_for(sequence.num_computed + len)
                .saturating_sub(sequence.block_table.len());
            if needed == 0 {
                return true;
            }
            if let Some(pages) = self.kv.allocate(needed) {
                self.running[index].block_table.extend(pages);
                return true;
            }
            let victim = self.running.len() - 1;
            self.preempt_newest(plan, budget);
            if victim == index {
                return false;
            }
        }
    }

    /// Preempt by recompute: free the newest running sequence's pages and requeue it first.
    fn preempt_newest(&mut self, plan: &mut StepPlan, budget: &mut usize) {
        let Some(mut victim) = self.running.pop() else {
            return;
        };
        if let Some(at) = plan.chunks.iter().position(|c| c.id == victim.id) {
            *budget += plan.chunks.remove(at).len;
        }
        let pages = victim.reset_for_recompute();
        self.kv.release(&pages);
        tracing::debug!(id = victim.id, "preempted by recompute");
        plan.counters.preemptions += 1;
        self.waiting.push_front(victim);
    }

    /// FCFS: admit waiting requests while seats, budget and KV pages for the whole remaining
    /// prompt last; the first one that does not fit stops admission.
    fn admit(&mut self, plan: &mut StepPlan, budget: &mut usize) {
        let page_size = self.kv.page_size();
        while *budget > 0 && self.running.len() < self.config.max_num_seqs {
            let Some(head) = self.waiting.front() else {
                return;
            };
            // The last token is always computed: its logits give the next token.
            let shared = if head.needs_prompt_logprobs() {
                Vec::new()
            } else {
                self.kv
                    .acquire_prefix(&head.tokens[..head.tokens.len().saturating_sub(1)])
            };
            let needed = self.kv.pages_for(head.tokens.len()) - shared.len();
            let Some(fresh) = self.kv.allocate(needed) else {
                self.kv.release(&shared);
                return;
            };
            let Some(mut sequence) = self.waiting.pop_front() else {
                return;
            };
            sequence.num_computed = shared.len() * page_size;
            sequence.num_published_pages = shared.len();
            sequence.block_table = shared;
            sequence.block_table.extend(fresh);
            if !sequence.prompt_info_sent {
                sequence.num_cached_tokens = sequence.num_computed;
                sequence.scheduled_at.get_or_insert_with(Instant::now);
                plan.counters.prefix_queried_tokens += sequence.num_prompt_tokens as u64;
                plan.counters.prefix_hit_tokens += sequence.num_computed as u64;
            }
            self.running.push(sequence);
            let index = self.running.len() - 1;
            let len = self.running[index].num_pending().min(*budget);
            plan.chunks.push(self.chunk(index, len));
            *budget -= len;
        }
    }

    fn chunk(&self, index: usize, len: usize) -> ScheduledChunk {
        let sequence = &self.running[index];
        let start = sequence.num_computed;
        let logits = if sequence.needs_prompt_logprobs() {
            LogitsRequest::All
        } else if start + len == sequence.tokens.len() {
            LogitsRequest::Last
        } else {
            LogitsRequest::None
        };
        ScheduledChunk {
            id: sequence.id,
            index,
            start,
            len,
            logits,
        }
    }

    /// The backend's view of a plan.
    pub fn batch(&self, plan: &StepPlan) -> Vec<SeqBatch<'_>> {
        plan.chunks
            .iter()
            .map(|chunk| {
                let sequence = &self.running[chunk.index];
                let end = chunk.start + chunk.len;
                SeqBatch {
                    tokens: &sequence.tokens[chunk.start..end],
                    start_pos: chunk.start,
                    block_table: &sequence.block_table[..self.kv.pages_for(end)],
                    logits: chunk.logits,
                }
            })
            .collect()
    }

    /// The plan ran: its tokens' K/V are in the cache. Publish newly full pages.
    pub fn complete(&mut self, plan: &StepPlan) {
        for chunk in &plan.chunks {
            let sequence = &mut self.running[chunk.index];
            sequence.num_computed = chunk.start + chunk.len;
            sequence.num_published_pages = self.kv.publish_full_pages(
                &sequence.tokens,
                &mut sequence.block_table,
                sequence.num_computed,
                sequence.num_published_pages,
            );
        }
    }

    /// Exact page accounting against every live block table (property tests).
    pub fn check_accounting(&self) -> Result<(), String> {
        if let Some(s) = self.waiting.iter().find(|s| !s.block_table.is_empty()) {
            return Err(format!("waiting request {} holds pages", s.id));
        }
        self.kv
            .check_accounting(self.running.iter().map(|s| s.block_table.as_slice()))
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
