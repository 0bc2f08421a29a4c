//! Admission: FCFS from the waiting queue into the running batch, each request starting
//! after the longest usable prefix the KV manager has cached (pages, and where the model needs
//! them, the state snapshot or the window pages kept with them).

use std::time::Instant;

use super::{prompt_chunk_len, Scheduler, StepPlan};
use crate::kv::{KvManager, PageId, PrefixHit};

impl Scheduler {
    /// FCFS: admit waiting requests while seats, budget and KV pages for the whole remaining
    /// prompt last; the first one that does not fit stops admission.
    pub(super) fn admit(&mut self, plan: &mut StepPlan, budget: &mut usize) {
        let page_size = self.kv.page_size();
        while *budget > 0 && self.running.len() < self.config.max_num_seqs {
            let Some(head) = self.waiting.front() else {
                return;
            };
            // The last token is always computed: its logits give the next token. A tail of one
            // token would be a one-token prompt chunk (see `prompt_chunk_len`): the last
            // cached page is computed again instead.
            let hit = if head.needs_prompt_logprobs() {
                PrefixHit::default()
            } else if self.kv.restores_at_pages() {
                // Recurrent state or a window pool: only where a snapshot or the window's
                // pages are kept, leaving 2 tokens or more (the last page is not given back
                // below: what was kept for it would not fit).
                let most = head.tokens().len().saturating_sub(2) / page_size;
                self.kv.acquire_restorable_prefix(head.tokens(), most)
            } else {
                let tokens = &head.tokens()[..head.tokens().len().saturating_sub(1)];
                PrefixHit {
                    pages: self.kv.acquire_prefix(tokens),
                    ..PrefixHit::default()
                }
            };
            let PrefixHit {
                pages: mut shared,
                window_table: shared_window,
                snapshot: restore,
            } = hit;
            if head.tokens().len() - shared.len() * page_size == 1 {
                if let Some(page) = shared.pop() {
                    self.kv.release(&[page]);
                }
            }
            let needed = self.kv.pages_for(head.tokens().len()) - shared.len();
            let give_back = |kv: &mut KvManager, pages: &[PageId], window: &[PageId]| {
                kv.release_tables(pages, window);
                if let Some(snapshot) = restore {
                    kv.snapshots_mut().unpin(snapshot);
                }
            };
            let Some(fresh) = self.kv.allocate(needed) else {
                give_back(&mut self.kv, &shared, &shared_window);
                return;
            };
            // Window pages only for the first chunk: the rest come step by step.
            let start = shared.len() * page_size;
            let first_chunk = prompt_chunk_len(head.tokens().len() - start, *budget);
            let mut window_table = shared_window;
            if !self
                .kv
                .cover_window(&mut window_table, start, start + first_chunk)
            {
                give_back(&mut self.kv, &shared, &window_table);
                self.kv.release(&fresh);
                return;
            }
            let state_slot = if self.kv.state_slots().capacity() > 0 {
                let Some(slot) = self.kv.state_slots_mut().acquire() else {
                    give_back(&mut self.kv, &shared, &window_table);
                    self.kv.release(&fresh);
                    return;
                };
                Some(slot)
            } else {
                None
            };
            let Some(mut sequence) = self.waiting.pop_front() else {
                return;
            };
            sequence.num_computed = shared.len() * page_size;
            // Cached pages hold the draft model's K/V too, when there is one (see `spec`).
            sequence.spec.draft_computed = sequence.num_computed;
            sequence.num_published_pages = shared.len();
            sequence.block_table = shared;
            sequence.block_table.extend(fresh);
            sequence.window_table = window_table;
            sequence.state_slot = state_slot;
            sequence.fresh_slot = state_slot.is_some();
            sequence.state_restore = restore;
            if !sequence.prompt_info_sent() {
                sequence.num_cached_tokens = sequence.num_computed;
                sequence.scheduled_at.get_or_insert_with(Instant::now);
                plan.counters.prefix_queried_tokens += sequence.num_prompt_tokens as u64;
                plan.counters.prefix_hit_tokens += sequence.num_computed as u64;
            }
            self.running.push(sequence);
            let index = self.running.len() - 1;
            let len = prompt_chunk_len(self.running[index].num_pending(), *budget);
            if len > 0 {
                let chunk = self.chunk(index, len);
                self.plan_snapshot(index, chunk.start + chunk.len);
                plan.chunks.push(chunk);
                *budget -= len;
            }
        }
    }
}
