//! The scheduler's share of recurrent state (models with linear-attention layers): a seat
//! slot per running sequence, the snapshot a prefix hit restores, the snapshots its steps
//! save every interval, and their release when a sequence leaves.

use super::Scheduler;
use crate::sequence::Sequence;

impl Scheduler {
    /// Gives back the recurrent-state slot of a sequence leaving the running batch, with the
    /// snapshot it was to restore and the one it was to save.
    pub(super) fn release_state_slot(&mut self, sequence: &mut Sequence) {
        if let Some(slot) = sequence.state_slot.take() {
            self.kv.state_slots_mut().release(slot);
        }
        if let Some(snapshot) = sequence.state_restore.take() {
            self.kv.snapshots_mut().unpin(snapshot);
        }
        if let Some(slot) = sequence.state_save.take() {
            self.kv.snapshots_mut().release(slot);
        }
    }

    /// For a model keeping state snapshots: when the chunk of `index` ending at `end` ends a
    /// snapshot interval on a page not snapshotted yet, reserve the slot its step saves into.
    pub(super) fn plan_snapshot(&mut self, index: usize, end: usize) {
        if !self.kv.snapshot_due(end) {
            return;
        }
        let page_size = self.kv.page_size();
        let sequence = &self.running[index];
        let page = sequence.block_table[end / page_size - 1];
        if sequence.state_save.is_some() || self.kv.snapshots().has(page) {
            return;
        }
        self.running[index].state_save = self.kv.snapshots_mut().reserve();
    }

    /// After a step: the restore is done (unpin), and a saved snapshot is kept with the page
    /// it ends, once that page is published (else the slot goes back).
    pub(super) fn settle_snapshots(&mut self, index: usize) {
        let page_size = self.kv.page_size();
        let sequence = &mut self.running[index];
        let (restored, saved) = (sequence.state_restore.take(), sequence.state_save.take());
        let end = sequence.num_computed;
        let published = sequence.num_published_pages * page_size >= end && end > 0;
        let page = sequence
            .block_table
            .get(end.div_ceil(page_size).saturating_sub(1));
        let snapshots = self.kv.snapshots_mut();
        if let Some(snapshot) = restored {
            snapshots.unpin(snapshot);
        }
        match (saved, page) {
            (Some(slot), Some(&page)) if published => snapshots.attach(page, slot),
            (Some(slot), _) => snapshots.release(slot),
            (None, _) => {}
        }
    }

    /// The state slots and snapshot slots are held exactly by the running sequences (seats,
    /// pending restores and saves) and the snapshot cache.
    pub(super) fn check_state_accounting(&self) -> Result<(), String> {
        if let Some(s) = self
            .waiting
            .iter()
            .find(|s| s.state_slot.is_some() || s.state_restore.is_some() || s.state_save.is_some())
        {
            return Err(format!("waiting request {} holds a state slot", s.id));
        }
        let snapshots = self.kv.snapshots();
        let reserved = self
            .running
            .iter()
            .filter(|s| s.state_save.is_some())
            .count();
        if snapshots.accounted() + reserved != snapshots.capacity() {
            return Err(format!(
                "snapshot slots: {} free or held + {reserved} reserved != {}",
                snapshots.accounted(),
                snapshots.capacity()
            ));
        }
        let slots = self.kv.state_slots();
        let mut held: Vec<_> = self.running.iter().filter_map(|s| s.state_slot).collect();
        held.sort_unstable();
        held.dedup();
        let running = self.running.len();
        if slots.capacity() > 0
            && (held.len() != running || slots.num_free() + running != slots.capacity())
        {
            return Err(format!(
                "{running} running sequences hold {} distinct state slots, {} of {} free",
                held.len(),
                slots.num_free(),
                slots.capacity()
            ));
        }
        Ok(())
    }
}
