//! The KV manager the scheduler uses: pages for a sequence's next tokens, prefix sharing,
//! release, and eviction of cached pages when the pool runs short; and, for models with
//! linear-attention layers, a recurrent-state slot per running sequence; for models with
//! sliding-window layers, those layers' pages in a pool of their own (`window_pages`).

pub mod events;
pub mod page_pool;
pub mod radix_cache;
pub mod state_slots;
pub mod state_snapshots;
pub mod window_pages;

pub use events::{block_hash, BlockHash, KvEvent, KvEventSink};
pub use page_pool::{PageId, PagePool};
pub use radix_cache::{NoPrefixCache, PrefixCache, RadixCache};
pub use state_slots::{SlotId, StateSlots};
pub use state_snapshots::StateSnapshots;
pub use window_pages::{WindowPages, NULL_WINDOW_PAGE};

/// A prefix hit, retained for the caller: the cached pages, the window table that goes with
/// them (empty for a model without a window pool) and the pinned state snapshot to restore
/// (a model with recurrent state).
#[derive(Debug, Default)]
pub struct PrefixHit {
    pub pages: Vec<PageId>,
    pub window_table: Vec<PageId>,
    pub snapshot: Option<SlotId>,
}

pub struct KvManager {
    page_size: usize,
    pool: PagePool,
    cache: Box<dyn PrefixCache>,
    state_slots: StateSlots,
    snapshots: StateSnapshots,
    /// Snapshots are taken where a step ends on a multiple of this many tokens (a multiple of
    /// the page size; 0: never).
    snapshot_interval: usize,
    /// The sliding-window layers' pages, when the backend keeps them apart.
    window: Option<WindowPages>,
}

impl KvManager {
    pub fn new(num_pages: usize, page_size: usize, enable_prefix_caching: bool) -> Self {
        let cache: Box<dyn PrefixCache> = if enable_prefix_caching {
            Box::new(RadixCache::new(page_size))
        } else {
            Box::new(NoPrefixCache)
        };
        Self {
            page_size,
            pool: PagePool::new(num_pages),
            cache,
            state_slots: StateSlots::default(),
            snapshots: StateSnapshots::default(),
            snapshot_interval: 0,
            window: None,
        }
    }

    /// Keeps the sliding-window layers' pages in a pool of `pages` of their own, for layers
    /// that look back at most `window` positions: every sequence gets a window table beside
    /// its block table, and gives back what falls out of its window.
    pub fn with_window_pages(mut self, window: usize, pages: usize) -> Self {
        self.window = Some(WindowPages::new(window, self.page_size, pages));
        self
    }

    pub fn window_pages(&self) -> Option<&WindowPages> {
        self.window.as_ref()
    }

    /// Gives every running sequence one of `seats` recurrent-state slots (a model with
    /// linear-attention layers), and keeps up to `snapshots` snapshots of state at cached
    /// pages, taken every `interval` tokens (rounded up to whole pages). Such a model can
    /// start from cached pages only where a snapshot is kept: without snapshots, prefix
    /// caching is off.
    pub fn with_state_slots(mut self, seats: usize, snapshots: usize, interval: usize) -> Self {
        self.state_slots = StateSlots::new(seats);
        self.snapshots = StateSnapshots::new(seats as SlotId, snapshots);
        self.snapshot_interval = interval.max(1).next_multiple_of(self.page_size);
        if seats > 0 && snapshots == 0 {
            self.cache = Box::new(NoPrefixCache);
        }
        self
    }

    /// Gives every running sequence one of `seats` slots for what a backend keeps per
    /// sequence beside its pages (a draft head's hidden rows); no state snapshots, and prefix
    /// caching as it was.
    pub fn with_seat_slots(mut self, seats: usize) -> Self {
        self.state_slots = StateSlots::new(seats);
        self
    }

    /// Whether sequences restore state snapshots at prefix hits and save them on the way.
    pub fn keeps_snapshots(&self) -> bool {
        self.state_slots.capacity() > 0 && self.snapshots.capacity() > 0
    }

    /// Whether a step that leaves `computed` tokens computed should snapshot the state there.
    pub fn snapshot_due(&self, computed: usize) -> bool {
        self.keeps_snapshots() && computed > 0 && computed % self.snapshot_interval == 0
    }

    /// The first point after `computed` tokens where a snapshot is due (`None`: none kept).
    pub fn next_snapshot(&self, computed: usize) -> Option<usize> {
        self.keeps_snapshots()
            .then(|| (computed / self.snapshot_interval + 1) * self.snapshot_interval)
    }

    pub fn snapshots(&self) -> &StateSnapshots {
        &self.snapshots
    }

    pub fn snapshots_mut(&mut self) -> &mut StateSnapshots {
        &mut self.snapshots
    }

    /// Whether a prefix hit must end where more than pages are kept: a state snapshot (a model
    /// with recurrent state), or the window pages of the next query (a window pool).
    pub fn restores_at_pages(&self) -> bool {
        self.keeps_snapshots() || self.window.is_some()
    }

    /// The longest cached run of full pages prefixing `tokens` (at most `max_pages`) that a
    /// sequence can start after: with recurrent state, its last page has a snapshot (pinned
    /// for the caller); with a window pool, the window pages its next query reads are kept.
    /// Everything in the hit is retained for the caller.
    pub fn acquire_restorable_prefix(&mut self, tokens: &[u32], max_pages: usize) -> PrefixHit {
        let mut pages = self.cache.match_prefix(tokens);
        pages.truncate(max_pages);
        let snapshots = self.keeps_snapshots();
        while let Some(&last) = pages.last() {
            let state_ok = !snapshots || self.snapshots.has(last);
            let window_ok = self.window.as_ref().is_none_or(|w| w.covers(&pages));
            if state_ok && window_ok {
                break;
            }
            pages.pop();
        }
        let snapshot = match pages.last() {
            Some(&last) if snapshots => self.snapshots.pin(last),
            _ => None,
        };
        for &page in &pages {
            self.pool.retain(page);
        }
        let window_table = self
            .window
            .as_mut()
            .map_or_else(Vec::new, |w| w.acquire(&pages));
        PrefixHit {
            pages,
            window_table,
            snapshot,
        }
    }

    /// The recurrent-state slots (capacity 0 for attention-only models).
    pub fn state_slots(&self) -> &StateSlots {
        &self.state_slots
    }

    pub fn state_slots_mut(&mut self) -> &mut StateSlots {
        &mut self.state_slots
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Report the prefix cache's stored and evicted pages to `sink` (`events`).
    pub fn set_event_sink(&mut self, sink: Box<dyn KvEventSink>) {
        self.cache.set_event_sink(sink);
    }

    pub fn num_pages(&self) -> usize {
        self.pool.num_pages()
    }

    /// Pages referenced by live sequences.
    pub fn num_referenced(&self) -> usize {
        self.pool.num_referenced()
    }

    /// Pages on the free list (not counting evictable cached ones).
    pub fn num_free(&self) -> usize {
        self.pool.num_free()
    }

    /// Pages that can be had now: free ones plus cached ones nobody references (evictable).
    pub fn num_available(&self) -> usize {
        self.pool.num_free() + self.pool.num_unreferenced_held()
    }

    /// Pages needed to hold `num_tokens` tokens.
    pub fn pages_for(&self, num_tokens: usize) -> usize {
        num_tokens.div_ceil(self.page_size)
    }

    /// The longest cached run of full pages prefixing `tokens`, retained for the caller.
    pub fn acquire_prefix(&mut self, tokens: &[u32]) -> Vec<PageId> {
        let pages = self.cache.match_prefix(tokens);
        for &page in &pages {
            self.pool.retain(page);
        }
        pages
    }

    /// Gives `window_table` real pages where positions `start..end` are written (no-op
    /// without a window pool). All or nothing.
    pub fn cover_window(
        &mut self,
        window_table: &mut Vec<PageId>,
        start: usize,
        end: usize,
    ) -> bool {
        match self.window.as_mut() {
            Some(w) => w.cover(window_table, start, end),
            None => true,
        }
    }

    /// Drop one reference to each page of a block table and of its window table.
    pub fn release_tables(&mut self, pages: &[PageId], window_table: &[PageId]) {
        self.release(pages);
        if let Some(w) = self.window.as_mut() {
            w.release(window_table);
        }
    }

    /// Gives back the window pages of `window_table` that no query from `next_pos` on reads.
    pub fn release_behind_window(&mut self, window_table: &mut [PageId], next_pos: usize) {
        if let Some(w) = self.window.as_mut() {
            w.release_behind(window_table, next_pos);
        }
    }

    /// `count` fresh pages (refcount 1), evicting unreferenced cached pages as needed.
    /// All or nothing: `None` leaves the pool as it was.
    pub fn allocate(&mut self, count: usize) -> Option<Vec<PageId>> {
        if count > self.num_available() {
            return None;
        }
        let mut pages = Vec::with_capacity(count);
        while pages.len() < count {
            match self.pool.alloc().or_else(|| self.evict_and_alloc()) {
                Some(page) => pages.push(page),
                None => {
                    tracing::error!(count, "KV pool accounting said pages were available");
                    self.release(&pages);
                    return None;
                }
            }
        }
        Some(pages)
    }

    fn evict_and_alloc(&mut self) -> Option<PageId> {
        let pool = &self.pool;
        let victim = self.cache.evict_one(&|page| pool.refcount(page) == 0)?;
        self.snapshots.forget_page(victim);
        if let Some(w) = self.window.as_mut() {
            w.forget(victim);
        }
        self.pool.free(victim);
        self.pool.alloc()
    }

    /// Drop one reference to each page; unreferenced pages stay cached if the cache holds them.
    pub fn release(&mut self, pages: &[PageId]) {
        for &page in pages {
            if self.pool.release(page) == 0 && !self.cache.contains(page) {
                self.pool.free(page);
            }
        }
    }

    /// Publish a sequence's full, computed pages (positions `0..num_computed`) to the prefix
    /// cache. Pages `..already_cached` were published before. Where the cache already holds an
    /// equal page (same prefix computed by another sequence), the block table switches to it
    /// and the duplicate is released. With a window pool, each published page keeps the
    /// window page of `window_table` at its index (empty: none kept). Returns the new number of
    /// published pages.
    pub fn publish_full_pages(
        &mut self,
        tokens: &[u32],
        block_table: &mut [PageId],
        window_table: &[PageId],
        num_computed: usize,
        already_cached: usize,
    ) -> usize {
        let full = (num_computed / self.page_size).min(block_table.len());
        if full <= already_cached {
            return already_cached;
        }
        let canonical = self.cache.insert(
            &tokens[..full * self.page_size],
            &block_table[..full],
            already_cached,
        );
        for (slot, cached) in block_table[already_cached..full].iter_mut().zip(canonical) {
            if *slot != cached {
                self.pool.retain(cached);
                let duplicate = std::mem::replace(slot, cached);
                self.release(&[duplicate]);
            }
        }
        if let Some(w) = self.window.as_mut() {
            for (&page, &window_page) in block_table[already_cached..full]
                .iter()
                .zip(window_table.iter().skip(already_cached))
            {
                w.keep(page, window_page);
            }
        }
        full
    }

    /// Check the window pool's accounting against the window tables of every live sequence.
    pub fn check_window_accounting<'a>(
        &self,
        window_tables: impl IntoIterator<Item = &'a [PageId]>,
    ) -> Result<(), String> {
        match &self.window {
            Some(w) => w.check_accounting(window_tables),
            None => Ok(()),
        }
    }

    /// Check the page accounting against the block tables of every live sequence: each page
    /// is free, or referenced exactly as often as block tables hold it, or cached unreferenced.
    pub fn check_accounting<'a>(
        &self,
        block_tables: impl IntoIterator<Item = &'a [PageId]>,
    ) -> Result<(), String> {
        let total = self.pool.num_pages();
        let mut holders = vec![0u32; total];
        for table in block_tables {
            for &page in table {
                holders[page as usize] += 1;
            }
        }
        let mut cached = vec![false; total];
        for page in self.cache.cached_pages() {
            cached[page as usize] = true;
        }
        let (mut free, mut referenced, mut cached_unreferenced) = (0, 0, 0);
        for page in 0..total {
            let id = page as PageId;
            if self.pool.refcount(id) != holders[page] {
                return Err(format!(
                    "page {page}: refcount {} but {} block tables hold it",
                    self.pool.refcount(id),
                    holders[page]
                ));
            }
            match (self.pool.is_free(id), holders[page] > 0, cached[page]) {
                (true, false, false) => free += 1,
                (true, _, _) => return Err(format!("page {page} is free but held or cached")),
                (false, true, _) => referenced += 1,
                (false, false, true) => cached_unreferenced += 1,
                (false, false, false) => return Err(format!("page {page} leaked")),
            }
        }
        if free != self.pool.num_free() || referenced != self.pool.num_referenced() {
            return Err(format!(
                "counters: free {} (counted {free}), referenced {} (counted {referenced})",
                self.pool.num_free(),
                self.pool.num_referenced()
            ));
        }
        if free + referenced + cached_unreferenced != total {
            return Err("free + referenced + cached-unreferenced != total".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
