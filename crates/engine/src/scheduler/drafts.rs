//! Room for speculative drafts: the scheduler's side of speculative decoding. Drafts take
//! pages only from the free list and tokens only from what the step's budget has left, and
//! are settled (kept or dropped, pages trimmed) when the step commits.

use super::{ScheduledChunk, Scheduler};
use crate::backend::LogitsRequest;

impl Scheduler {
    /// Room for up to `k` drafts after the decode chunk of running sequence `index`: pages
    /// from the free list only (speculation never preempts nor evicts cached prefixes), and
    /// tokens from what the step's budget has left after `rows` (the plan's tokens and the
    /// drafts granted before). Returns how many drafts fit.
    ///
    /// A model with recurrent state snapshots it at fixed points (`next_snapshot`) after a
    /// step that ends there: drafts never cross such a point, and a step that saves one
    /// drafts nothing (the state after rejected drafts is no snapshot). Without this,
    /// speculation's jumps would skip the points and leave prefix hits fewer places to start.
    pub fn reserve_drafts(&mut self, rows: usize, index: usize, k: usize) -> usize {
        let mut k = k.min(self.config.max_num_batched_tokens.saturating_sub(rows));
        let sequence = &self.running[index];
        let (len, held) = (sequence.tokens().len(), sequence.block_table.len());
        if sequence.state_slot.is_some() {
            if sequence.state_save.is_some() {
                return 0;
            }
            if let Some(point) = self.kv.next_snapshot(len) {
                // The step after the last draft's must end at `point`: its chunk is then
                // `point - 1`'s decode at most.
                k = k.min(point - 1 - len);
            }
        }
        if k == 0 {
            return 0;
        }
        let wanted = self.kv.pages_for(len + k).saturating_sub(held);
        let pages = wanted.min(self.kv.num_free());
        if pages > 0 {
            if let Some(fresh) = self.kv.allocate(pages) {
                self.running[index].block_table.extend(fresh);
            }
        }
        let room = self.running[index].block_table.len() * self.kv.page_size();
        let k = room.saturating_sub(len).min(k);
        // The scored token and the drafts are written to window pages too (none: no drafts).
        let sequence = &mut self.running[index];
        let start = sequence.num_computed;
        if k > 0
            && !self
                .kv
                .cover_window(&mut sequence.window_table, start, len + k)
        {
            return 0;
        }
        k
    }

    /// Appends verified-to-be drafts to the sequence of decode chunk `chunk` and makes the
    /// chunk score them all (room must have been reserved).
    pub fn attach_drafts(&mut self, chunk: &mut ScheduledChunk, drafts: &[u32]) {
        self.running[chunk.index].attach_drafts(drafts);
        chunk.len += drafts.len();
        chunk.drafts = drafts.len();
        chunk.logits = LogitsRequest::All;
    }

    /// After verification of the drafts of running sequence `index`: the first `accepted`
    /// stay (their K/V, and the scored token's before them, are now computed), the rest are
    /// dropped, full pages are published, and pages past the next token are released.
    pub(super) fn settle_drafts(&mut self, index: usize, accepted: usize) {
        let page_size = self.kv.page_size();
        let sequence = &mut self.running[index];
        sequence.settle_drafts(accepted);
        // Keep pages for every computed token and the one sampled next.
        let keep = (sequence.num_computed + 1).div_ceil(page_size);
        let surplus = sequence
            .block_table
            .split_off(keep.min(sequence.block_table.len()));
        let window_surplus = sequence
            .window_table
            .split_off(keep.min(sequence.window_table.len()));
        self.kv.release_tables(&surplus, &window_surplus);
        self.publish(index);
        self.release_behind_window(index);
    }
}
