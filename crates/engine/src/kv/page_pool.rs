//! A fixed pool of KV page ids with reference counts.
//!
//! A page is in exactly one of three states: free (on the free list), referenced (refcount > 0:
//! held by the block tables of live sequences), or held at refcount 0 by the prefix cache. The
//! pool only knows the first two; whoever drops a page to refcount 0 decides whether it goes
//! back to the free list or stays cached.

pub type PageId = u32;

#[derive(Debug)]
pub struct PagePool {
    refcounts: Vec<u32>,
    is_free: Vec<bool>,
    free_list: Vec<PageId>,
    num_referenced: usize,
}

impl PagePool {
    pub fn new(num_pages: usize) -> Self {
        // Pop from the back, so hand out low ids first (easier to read in logs and tests).
        let free_list = (0..num_pages as PageId).rev().collect();
        Self {
            refcounts: vec![0; num_pages],
            is_free: vec![true; num_pages],
            free_list,
            num_referenced: 0,
        }
    }

    pub fn num_pages(&self) -> usize {
        self.refcounts.len()
    }

    pub fn num_free(&self) -> usize {
        self.free_list.len()
    }

    /// Pages with refcount > 0.
    pub fn num_referenced(&self) -> usize {
        self.num_referenced
    }

    /// Pages that are neither free nor referenced: held by the prefix cache alone.
    pub fn num_unreferenced_held(&self) -> usize {
        self.num_pages() - self.num_free() - self.num_referenced
    }

    pub fn refcount(&self, page: PageId) -> u32 {
        self.refcounts[page as usize]
    }

    pub fn is_free(&self, page: PageId) -> bool {
        self.is_free[page as usize]
    }

    /// Take a free page with refcount 1.
    pub fn alloc(&mut self) -> Option<PageId> {
        let page = self.free_list.pop()?;
        self.is_free[page as usize] = false;
        self.refcounts[page as usize] = 1;
        self.num_referenced += 1;
        Some(page)
    }

    /// One more holder of a page that is not free.
    pub fn retain(&mut self, page: PageId) {
        debug_assert!(!self.is_free(page), "retain of free page {page}");
        let count = &mut self.refcounts[page as usize];
        if *count == 0 {
            self.num_referenced += 1;
        }
        *count += 1;
    }

    /// One holder fewer; returns the remaining count.
    pub fn release(&mut self, page: PageId) -> u32 {
        let count = &mut self.refcounts[page as usize];
        debug_assert!(*count > 0, "release of unreferenced page {page}");
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.num_referenced -= 1;
        }
        *count
    }

    /// Return an unreferenced page to the free list.
    pub fn free(&mut self, page: PageId) {
        debug_assert_eq!(
            self.refcounts[page as usize], 0,
            "free of referenced page {page}"
        );
        debug_assert!(!self.is_free(page), "double free of page {page}");
        if self.is_free[page as usize] || self.refcounts[page as usize] != 0 {
            return;
        }
        self.is_free[page as usize] = true;
        self.free_list.push(page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_release_free_round_trip() {
        let mut pool = PagePool::new(3);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        let c = pool.alloc().unwrap();
        assert_eq!(pool.alloc(), None);
        assert_eq!([a, b, c], [0, 1, 2]);
        pool.retain(b);
        assert_eq!(pool.release(b), 1);
        assert_eq!(pool.release(b), 0);
        assert_eq!(pool.num_referenced(), 2);
        assert_eq!(pool.num_unreferenced_held(), 1);
        pool.free(b);
        assert!(pool.is_free(b));
        assert_eq!(pool.num_free(), 1);
        assert_eq!(pool.alloc(), Some(b));
    }
}
