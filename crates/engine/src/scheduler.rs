//! The scheduling policy: which tokens of which sequences run in the next step.
//!
//! Continuous batching under a per-step token budget: decodes first (one token each, so a long
//! prompt never starves them), then chunks of prompts already running, then admission of
//! waiting requests in the policy's order (FCFS, or by priority) while the pool holds their
//! whole remaining prompt. A running sequence that needs a page when none can be had preempts
//! by recompute the running sequence the policy puts last (the newest, or the lowest priority).
//! Pure: no threads, no tensors; the engine loop drives it.

mod admission;
mod drafts;
mod preemption;
mod state;

use std::collections::VecDeque;

use crate::backend::{LogitsRequest, SeqBatch, StateCopy};
use crate::config::SchedulingPolicy;
use crate::kv::{KvManager, NULL_WINDOW_PAGE};
use crate::request::RequestId;
use crate::sequence::Sequence;
use crate::stats::StepCounters;

#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    /// While sequences decode, a step takes at most `max(MIN_PREFILL_CHUNK, this × decodes)`
    /// prompt tokens (0: no cap beyond the budget). Where a step's time grows with its
    /// tokens (a CPU), this bounds how much an arriving prompt slows the running streams.
    pub prefill_per_decode: usize,
    pub policy: SchedulingPolicy,
}

/// The smallest prompt chunk a step takes while others decode (progress for new requests).
pub const MIN_PREFILL_CHUNK: usize = 16;

/// One sequence's work in a step: `tokens[start..start + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledChunk {
    pub id: RequestId,
    /// Index into the running list, valid until the step is completed.
    pub index: usize,
    pub start: usize,
    pub len: usize,
    pub logits: LogitsRequest,
    /// Speculative drafts among the last `len` tokens (0 for ordinary chunks).
    pub drafts: usize,
}

/// What the step decided for one chunk's sequence, for [`Scheduler::commit`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOutcome {
    /// Drafts the target kept (chunks that scored drafts).
    pub accepted_drafts: usize,
    /// The token sampled after the chunk (none for a chunk in the middle of a prompt, or
    /// when the request finished among its accepted drafts).
    pub next_token: Option<u32>,
    /// The request ends with this step.
    pub finished: bool,
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
    /// A draft model keeps K/V in the same pages: publish only pages it has computed too, so
    /// that whoever reuses a cached prefix finds both models' K/V there.
    draft_cache: bool,
    kv: KvManager,
    /// In the policy's order: the next to admit first.
    waiting: VecDeque<Sequence>,
    /// In admission order.
    running: Vec<Sequence>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig, kv: KvManager) -> Self {
        Self {
            config,
            draft_cache: false,
            kv,
            waiting: VecDeque::new(),
            running: Vec::new(),
        }
    }

    /// Publish pages only once a draft model's cache holds them too.
    pub fn set_draft_cache(&mut self, draft_cache: bool) {
        self.draft_cache = draft_cache;
    }

    /// How many leading tokens of `sequence` may be published to the prefix cache.
    fn publishable(&self, sequence: &Sequence) -> usize {
        if self.draft_cache {
            sequence.num_computed.min(sequence.spec.draft_computed)
        } else {
            sequence.num_computed
        }
    }

    pub fn kv(&self) -> &KvManager {
        &self.kv
    }

    pub fn kv_mut(&mut self) -> &mut KvManager {
        &mut self.kv
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
        match self.config.policy {
            SchedulingPolicy::Fcfs => self.waiting.push_back(sequence),
            SchedulingPolicy::Priority => self.queue_by_priority(sequence),
        }
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
            let pages = std::mem::take(&mut sequence.block_table);
            let window = std::mem::take(&mut sequence.window_table);
            self.kv.release_tables(&pages, &window);
            self.release_state_slot(&mut sequence);
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
        let num_decodes = decodes.clone().count();
        let prefills = self.running.iter().filter(|s| s.num_pending() > 1);
        let order: Vec<RequestId> = decodes.chain(prefills).map(|s| s.id).collect();
        let mut prompt_budget = match self.config.prefill_per_decode {
            ratio if ratio > 0 && num_decodes > 0 => (ratio * num_decodes).max(MIN_PREFILL_CHUNK),
            _ => usize::MAX,
        };
        for id in order {
            if budget == 0 {
                break;
            }
            // Gone if an earlier sequence of this step preempted it.
            let Some(index) = self.running.iter().position(|s| s.id == id) else {
                continue;
            };
            let pending = self.running[index].num_pending();
            let is_prompt = pending > 1;
            let len = if is_prompt {
                prompt_chunk_len(pending, budget.min(prompt_budget))
            } else {
                pending.min(budget)
            };
            if len == 0 {
                continue;
            }
            if let Some(index) = self.grow_or_preempt(index, len, &mut plan, &mut budget) {
                let chunk = self.chunk(index, len);
                self.plan_snapshot(index, chunk.start + chunk.len);
                plan.chunks.push(chunk);
                budget -= len;
                if is_prompt {
                    prompt_budget -= len;
                }
            }
        }

        // Admitting right after a preemption would only thrash the pool.
        if plan.counters.preemptions == 0 {
            let mut admission_budget = budget.min(prompt_budget);
            self.admit(&mut plan, &mut admission_budget);
        }
        plan
    }

    fn chunk(&self, index: usize, len: usize) -> ScheduledChunk {
        let sequence = &self.running[index];
        let start = sequence.num_computed;
        let logits = if sequence.needs_prompt_logprobs() {
            LogitsRequest::All
        } else if start + len == sequence.tokens().len() {
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
            drafts: 0,
        }
    }

    /// The backend's view of a plan.
    pub fn batch(&self, plan: &StepPlan) -> Vec<SeqBatch<'_>> {
        self.batch_of(plan.chunks.iter())
    }

    /// The backend's view of some chunks of a plan.
    pub fn batch_of<'c>(
        &self,
        chunks: impl Iterator<Item = &'c ScheduledChunk>,
    ) -> Vec<SeqBatch<'_>> {
        chunks
            .map(|chunk| {
                let sequence = &self.running[chunk.index];
                let end = chunk.start + chunk.len;
                SeqBatch {
                    tokens: &sequence.tokens()[chunk.start..end],
                    start_pos: chunk.start,
                    block_table: &sequence.block_table[..self.kv.pages_for(end)],
                    window_table: sequence
                        .window_table
                        .get(..self.kv.pages_for(end))
                        .unwrap_or_default(),
                    state_slot: sequence.state_slot,
                    state_copy: StateCopy {
                        restore_from: sequence.state_restore,
                        save_to: sequence.state_save,
                        rewindable: chunk.drafts > 0 && sequence.state_slot.is_some(),
                        first_in_slot: sequence.fresh_slot,
                    },
                    logits: chunk.logits,
                }
            })
            .collect()
    }

    /// Every running sequence, in admission order (a plan's `index` points into it).
    pub fn running_all_mut(&mut self) -> &mut [Sequence] {
        &mut self.running
    }

    /// The step ran and its outcomes are decided: record what was computed, settle drafts,
    /// publish newly full pages to the prefix cache, append each sequence's new token, and
    /// take out the sequences that finished (their pages released). `outcomes` has one entry
    /// per chunk of `plan`.
    pub fn commit(&mut self, plan: &StepPlan, outcomes: &[ChunkOutcome]) {
        for chunk in &plan.chunks {
            self.running[chunk.index].fresh_slot = false;
        }
        for chunk in plan.chunks.iter().filter(|c| c.drafts == 0) {
            self.running[chunk.index].num_computed = chunk.start + chunk.len;
            self.publish(chunk.index);
            self.settle_snapshots(chunk.index);
            self.release_behind_window(chunk.index);
        }
        for (chunk, outcome) in plan.chunks.iter().zip(outcomes) {
            if chunk.drafts > 0 {
                self.settle_drafts(chunk.index, outcome.accepted_drafts);
            }
            if let Some(token) = outcome.next_token {
                self.running[chunk.index].push_token(token);
            }
        }
        let finished = plan.chunks.iter().zip(outcomes).filter(|(_, o)| o.finished);
        let ids: Vec<RequestId> = finished.map(|(chunk, _)| chunk.id).collect();
        for id in ids {
            self.remove(id);
        }
    }

    /// Hands running sequence `index`'s full, computed pages to the prefix cache.
    fn publish(&mut self, index: usize) {
        let upto = self.publishable(&self.running[index]);
        let sequence = &mut self.running[index];
        let already = sequence.num_published_pages;
        let (tokens, block_table, window_table) = sequence.tokens_and_pages_mut();
        let published =
            self.kv
                .publish_full_pages(tokens, block_table, window_table, upto, already);
        self.running[index].num_published_pages = published;
    }

    /// Gives back running sequence `index`'s window pages that its next queries do not read
    /// (after it is published: the prefix cache may keep them).
    fn release_behind_window(&mut self, index: usize) {
        let sequence = &mut self.running[index];
        let next = sequence.num_computed;
        self.kv
            .release_behind_window(&mut sequence.window_table, next);
    }

    /// Exact page accounting against every live block table (property tests).
    pub fn check_accounting(&self) -> Result<(), String> {
        if let Some(s) = self
            .waiting
            .iter()
            .find(|s| !s.block_table.is_empty() || !s.window_table.is_empty())
        {
            return Err(format!("waiting request {} holds pages", s.id));
        }
        if self.kv.window_pages().is_some() {
            if let Some(s) = self
                .running
                .iter()
                .find(|s| s.window_table.len() > s.block_table.len())
            {
                return Err(format!(
                    "request {}: window table past its block table",
                    s.id
                ));
            }
        }
        if let Some(w) = self.kv.window_pages() {
            for s in &self.running {
                let behind = w.first_live_page(s.num_computed).min(s.window_table.len());
                if s.window_table[..behind]
                    .iter()
                    .any(|&p| p != NULL_WINDOW_PAGE)
                {
                    return Err(format!(
                        "request {} holds window pages behind its window",
                        s.id
                    ));
                }
            }
        }
        self.check_state_accounting()?;
        self.kv
            .check_window_accounting(self.running.iter().map(|s| s.window_table.as_slice()))?;
        self.kv
            .check_accounting(self.running.iter().map(|s| s.block_table.as_slice()))
    }
}

/// Tokens of a prompt chunk: all `pending` ones within `limit`, but never a chunk of one token
/// out of several, nor one that leaves a single token behind (unless `limit` is under 3). A
/// backend may send one-token steps through a decode path (CUDA's decode attention) whose sums
/// differ from its prompt path's; without one-token chunks a prompt's last token takes the
/// prompt path however the prompt was cut, which keeps chunked and whole prefill identical.
fn prompt_chunk_len(pending: usize, limit: usize) -> usize {
    let len = pending.min(limit);
    if limit < 3 || len == pending {
        return len;
    }
    if pending - len == 1 {
        len - 1
    } else {
        len
    }
}

#[cfg(test)]
mod tests;
