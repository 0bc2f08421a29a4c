//! Pages of the sliding-window layers (Gemma 3's local layers, gpt-oss's banded ones,
//! Mistral's): a pool of their own, so that a sequence gives a page back as soon as every
//! query still to come looks past it, and holds at most its window plus one step's tokens.
//!
//! A sequence's window table is index-aligned with its block table (page `i` of both covers
//! positions `i * page_size ..`) but gets real pages only just before a step writes them
//! (`cover`); pages no query reads any more are replaced by [`NULL_WINDOW_PAGE`], a page that
//! is never handed out, so a backend that reads a whole table still reads memory it owns (its
//! K/V stay zero: nothing is ever written there).
//!
//! The prefix cache keeps full pages; this keeps, beside each cached full page, the window
//! page of the same positions while the pool can spare it. A prefix hit is usable up to a page
//! only where the window pages the next query reads are still kept (`covers`); when the pool
//! runs short, the least recently used kept pages that no sequence holds go first.

use std::collections::HashMap;

use super::page_pool::{PageId, PagePool};

/// The page released entries of a window table point at.
pub const NULL_WINDOW_PAGE: PageId = 0;

#[derive(Debug, Clone, Copy)]
struct Kept {
    page: PageId,
    last_use: u64,
}

#[derive(Debug)]
pub struct WindowPages {
    /// Positions a query sees, itself included (the largest window of the model's layers).
    window: usize,
    page_size: usize,
    pool: PagePool,
    /// Cached full page -> the window page of the same positions, kept with it.
    kept: HashMap<PageId, Kept>,
    clock: u64,
}

impl WindowPages {
    /// A pool of `pages` window pages (plus the null page) for layers that look back at most
    /// `window` positions.
    pub fn new(window: usize, page_size: usize, pages: usize) -> Self {
        let mut pool = PagePool::new(pages + 1);
        // Ids are handed out lowest first: the null page is 0 and is never given back.
        let null = pool.alloc();
        debug_assert_eq!(null, Some(NULL_WINDOW_PAGE));
        Self {
            window: window.max(1),
            page_size,
            pool,
            kept: HashMap::new(),
            clock: 0,
        }
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// Pages of the pool, the null page included (what the backend allocates).
    pub fn num_pages(&self) -> usize {
        self.pool.num_pages()
    }

    /// Pages held by sequences' window tables or kept with cached pages.
    pub fn num_used(&self) -> usize {
        self.pool.num_referenced() - 1
    }

    /// Pages held by sequences' window tables (not those only the cache keeps).
    pub fn num_in_use(&self) -> usize {
        self.num_used() - self.evictable().count()
    }

    /// The first page index a query at `pos` (or later) reads.
    pub fn first_live_page(&self, pos: usize) -> usize {
        (pos + 1).saturating_sub(self.window) / self.page_size
    }

    /// Pages that can be had now: free ones and kept ones only the cache holds.
    pub fn num_available(&self) -> usize {
        self.pool.num_free() + self.evictable().count()
    }

    fn evictable(&self) -> impl Iterator<Item = (&PageId, &Kept)> {
        self.kept
            .iter()
            .filter(|(_, k)| self.pool.refcount(k.page) == 1)
    }

    /// `count` fresh pages, giving up kept pages (least recently used first) as needed.
    /// All or nothing.
    pub fn allocate(&mut self, count: usize) -> Option<Vec<PageId>> {
        let short = count.saturating_sub(self.pool.num_free());
        if short > 0 {
            let mut victims: Vec<(u64, PageId)> =
                self.evictable().map(|(&f, k)| (k.last_use, f)).collect();
            if victims.len() < short {
                return None;
            }
            victims.sort_unstable();
            for &(_, full) in &victims[..short] {
                self.forget(full);
            }
        }
        (0..count).map(|_| self.pool.alloc()).collect()
    }

    /// Drop one reference to each page (null entries are skipped).
    pub fn release(&mut self, pages: &[PageId]) {
        for &page in pages.iter().filter(|&&p| p != NULL_WINDOW_PAGE) {
            if self.pool.release(page) == 0 {
                self.pool.free(page);
            }
        }
    }

    /// Gives real pages to the entries of `table` that positions `start..end` are written to,
    /// growing it to cover `end`. All or nothing: false leaves the table as it was.
    pub fn cover(&mut self, table: &mut Vec<PageId>, start: usize, end: usize) -> bool {
        let (first, last) = (start / self.page_size, end.div_ceil(self.page_size));
        let old_len = table.len();
        if old_len < last {
            table.resize(last, NULL_WINDOW_PAGE);
        }
        let missing: Vec<usize> = (first..last)
            .filter(|&i| table[i] == NULL_WINDOW_PAGE)
            .collect();
        match self.allocate(missing.len()) {
            Some(pages) => {
                for (i, page) in missing.into_iter().zip(pages) {
                    table[i] = page;
                }
                true
            }
            None => {
                table.truncate(old_len);
                false
            }
        }
    }

    /// Releases the pages of `table` that no query from position `next_pos` on reads. A
    /// table is null pages, then real ones (released from the front, covered from the back),
    /// so the walk back from the window's start stops at the first null page: each step
    /// costs the pages it releases, not the sequence's length.
    pub fn release_behind(&mut self, table: &mut [PageId], next_pos: usize) {
        let first = self.first_live_page(next_pos).min(table.len());
        for slot in table[..first].iter_mut().rev() {
            if *slot == NULL_WINDOW_PAGE {
                break;
            }
            let page = std::mem::replace(slot, NULL_WINDOW_PAGE);
            self.release(&[page]);
        }
    }

    /// Keeps `window_page` with the cached full page `full` (no-op for a null page or a full
    /// page that keeps one already).
    pub fn keep(&mut self, full: PageId, window_page: PageId) {
        if window_page == NULL_WINDOW_PAGE || self.kept.contains_key(&full) {
            return;
        }
        self.pool.retain(window_page);
        self.clock += 1;
        let last_use = self.clock;
        self.kept.insert(
            full,
            Kept {
                page: window_page,
                last_use,
            },
        );
    }

    /// The cached full page `full` is gone: so is what was kept with it.
    pub fn forget(&mut self, full: PageId) {
        if let Some(kept) = self.kept.remove(&full) {
            self.release(&[kept.page]);
        }
    }

    /// Whether a sequence can start after the cached pages `full` (a prefix hit): the window
    /// pages its first query reads are all kept.
    pub fn covers(&self, full: &[PageId]) -> bool {
        let first = self.first_live_page(full.len() * self.page_size);
        full[first..].iter().all(|p| self.kept.contains_key(p))
    }

    /// The window table of a sequence starting after the cached pages `full` (`covers` must
    /// hold): null where no query reads, the kept pages (retained) where one does.
    pub fn acquire(&mut self, full: &[PageId]) -> Vec<PageId> {
        let first = self.first_live_page(full.len() * self.page_size);
        self.clock += 1;
        let mut table = vec![NULL_WINDOW_PAGE; first];
        for p in &full[first..] {
            let Some(kept) = self.kept.get_mut(p) else {
                tracing::error!(page = p, "window page of a prefix hit is not kept");
                table.push(NULL_WINDOW_PAGE);
                continue;
            };
            kept.last_use = self.clock;
            let page = kept.page;
            self.pool.retain(page);
            table.push(page);
        }
        table
    }

    /// Each page is the null page, free, or referenced exactly by the tables holding it plus
    /// its keeping (if kept).
    pub fn check_accounting<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a [PageId]>,
    ) -> Result<(), String> {
        let mut holders = vec![0u32; self.pool.num_pages()];
        holders[NULL_WINDOW_PAGE as usize] = 1;
        for table in tables {
            for &page in table.iter().filter(|&&p| p != NULL_WINDOW_PAGE) {
                holders[page as usize] += 1;
            }
        }
        for kept in self.kept.values() {
            holders[kept.page as usize] += 1;
        }
        for (page, &held) in holders.iter().enumerate() {
            let id = page as PageId;
            if self.pool.refcount(id) != held || (held == 0) != self.pool.is_free(id) {
                return Err(format!(
                    "window page {page}: refcount {}, free {}, but {held} holders",
                    self.pool.refcount(id),
                    self.pool.is_free(id)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_behind_the_window_go_back_and_the_null_page_is_never_handed_out() {
        // Window 5 over pages of 2: a query at 9 reads 5..=9, pages 2.. .
        let mut w = WindowPages::new(5, 2, 6);
        assert_eq!(w.first_live_page(9), 2);
        let mut table = w.allocate(5).unwrap();
        assert!(!table.contains(&NULL_WINDOW_PAGE));
        assert_eq!(w.num_available(), 1);
        w.release_behind(&mut table, 9);
        assert_eq!(&table[..2], &[NULL_WINDOW_PAGE, NULL_WINDOW_PAGE]);
        assert_eq!(w.num_available(), 3);
        w.check_accounting([table.as_slice()]).unwrap();
        w.release(&table);
        assert_eq!(w.num_available(), 6);
        w.check_accounting([]).unwrap();
    }

    #[test]
    fn kept_pages_serve_hits_until_the_pool_needs_them() {
        let mut w = WindowPages::new(3, 2, 4);
        let full = [10, 11, 12];
        let mut table = w.allocate(3).unwrap();
        for (&f, &p) in full.iter().zip(&table) {
            w.keep(f, p);
        }
        // A query at 6 reads 4..=6: only page 2 must be kept.
        w.release_behind(&mut table, 6);
        w.release(&table);
        assert!(w.covers(&full));
        let hit = w.acquire(&full);
        assert_eq!(hit[..2], [NULL_WINDOW_PAGE, NULL_WINDOW_PAGE]);
        assert_ne!(hit[2], NULL_WINDOW_PAGE);
        w.check_accounting([hit.as_slice()]).unwrap();
        // Three pages are only kept (one is held by the hit): allocating 4 gives up all three
        // unheld ones... which is one short.
        assert_eq!(w.num_available(), 3);
        assert!(w.allocate(4).is_none());
        let fresh = w.allocate(3).unwrap();
        assert!(!w.covers(&full[..2]), "page 1's keeping was given up");
        assert!(w.covers(&full), "page 2 is held by a sequence, still kept");
        w.check_accounting([hit.as_slice(), fresh.as_slice()])
            .unwrap();
        w.forget(12);
        w.release(&hit);
        w.release(&fresh);
        w.check_accounting([]).unwrap();
        assert_eq!(w.num_available(), 4);
    }
}
