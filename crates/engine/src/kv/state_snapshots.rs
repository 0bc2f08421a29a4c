//! Snapshots of recurrent state kept with the prefix cache, so that a hybrid model (its
//! linear-attention layers carry state, not pages) can start a request from cached pages:
//! the state after a page-aligned prefix is kept in a snapshot slot attached to the cached
//! page that ends the prefix, and restored into the new sequence's slot on a hit.
//!
//! Snapshot slots are a fixed pool (`--state-cache-memory`), ids after the running seats'. A
//! full pool gives up its least recently used snapshot that no admission is about to restore.
//! A snapshot lives as long as its page stays cached (`forget_page` when the page is evicted).

use std::collections::HashMap;

use super::page_pool::PageId;
use super::state_slots::SlotId;

#[derive(Debug)]
struct Entry {
    page: PageId,
    last_use: u64,
    /// Admissions that will restore this snapshot in their next step.
    pins: u32,
}

#[derive(Debug, Default)]
pub struct StateSnapshots {
    /// Slots not holding a snapshot.
    free: Vec<SlotId>,
    /// Slot of each page's snapshot.
    by_page: HashMap<PageId, SlotId>,
    entries: HashMap<SlotId, Entry>,
    capacity: usize,
    clock: u64,
}

impl StateSnapshots {
    /// `count` snapshot slots with ids `first..first + count`.
    pub fn new(first: SlotId, count: usize) -> Self {
        Self {
            free: (first..first + count as SlotId).rev().collect(),
            capacity: count,
            ..Self::default()
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Snapshots held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn has(&self, page: PageId) -> bool {
        self.by_page.contains_key(&page)
    }

    /// The snapshot at the end of `page`, pinned until [`Self::unpin`] (an admission restores
    /// it in its next step), and marked as just used.
    pub fn pin(&mut self, page: PageId) -> Option<SlotId> {
        let slot = *self.by_page.get(&page)?;
        self.clock += 1;
        let entry = self.entries.get_mut(&slot)?;
        entry.pins += 1;
        entry.last_use = self.clock;
        Some(slot)
    }

    pub fn unpin(&mut self, slot: SlotId) {
        if let Some(entry) = self.entries.get_mut(&slot) {
            entry.pins = entry.pins.saturating_sub(1);
        }
    }

    /// A slot to save a snapshot into: a free one, or the least recently used unpinned
    /// snapshot's. `None` when every snapshot is pinned (or there are none).
    pub fn reserve(&mut self) -> Option<SlotId> {
        if let Some(slot) = self.free.pop() {
            return Some(slot);
        }
        let (&slot, entry) = self
            .entries
            .iter()
            .filter(|(_, e)| e.pins == 0)
            .min_by_key(|(_, e)| e.last_use)?;
        let page = entry.page;
        self.entries.remove(&slot);
        self.by_page.remove(&page);
        Some(slot)
    }

    /// Keeps the reserved `slot` as the snapshot at the end of `page`; a page that has one
    /// already keeps it and `slot` goes back to the pool.
    pub fn attach(&mut self, page: PageId, slot: SlotId) {
        if self.by_page.contains_key(&page) {
            self.free.push(slot);
            return;
        }
        self.clock += 1;
        self.by_page.insert(page, slot);
        let entry = Entry {
            page,
            last_use: self.clock,
            pins: 0,
        };
        self.entries.insert(slot, entry);
    }

    /// Gives back a reserved slot that was not attached.
    pub fn release(&mut self, slot: SlotId) {
        debug_assert!(!self.entries.contains_key(&slot));
        self.free.push(slot);
    }

    /// `page` left the prefix cache: its snapshot goes too.
    pub fn forget_page(&mut self, page: PageId) {
        if let Some(slot) = self.by_page.remove(&page) {
            self.entries.remove(&slot);
            self.free.push(slot);
        }
    }

    /// Slots free or holding a snapshot: every slot, when none is reserved.
    pub fn accounted(&self) -> usize {
        self.free.len() + self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_pool_gives_up_its_least_recently_used_unpinned_snapshot() {
        let mut s = StateSnapshots::new(10, 2);
        let (a, b) = (s.reserve().unwrap(), s.reserve().unwrap());
        s.attach(100, a);
        s.attach(200, b);
        // Page 100's snapshot is used again, then pinned page 200 is the older one...
        assert_eq!(s.pin(100), Some(a));
        s.unpin(a);
        assert_eq!(s.pin(200), Some(b));
        // ... but pinned: the pool gives up 100's.
        assert_eq!(s.reserve(), Some(a));
        assert!(!s.has(100) && s.has(200));
        // With everything pinned or reserved, nothing.
        assert_eq!(s.reserve(), None);
        s.unpin(b);
        assert_eq!(s.reserve(), Some(b));
        s.release(a);
        s.release(b);
        assert_eq!(s.accounted(), 2);
    }

    #[test]
    fn a_page_keeps_its_first_snapshot_and_loses_it_with_the_page() {
        let mut s = StateSnapshots::new(0, 2);
        let (a, b) = (s.reserve().unwrap(), s.reserve().unwrap());
        s.attach(7, a);
        s.attach(7, b);
        assert_eq!(s.len(), 1);
        assert_eq!(s.pin(7), Some(a));
        s.unpin(a);
        s.forget_page(7);
        assert!(s.is_empty());
        assert_eq!(s.accounted(), 2);
    }
}
