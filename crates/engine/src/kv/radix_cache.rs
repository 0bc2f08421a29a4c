//! Prefix cache over token ids at page granularity (SGLang's RadixAttention idea).
//!
//! Each tree node below the root is one FULL page: its `page_size` token ids and the KV page that
//! holds them. A path from the root spells a token prefix, so two requests with a common prefix
//! find the same pages. The tree holds pages without a reference: a page nobody references stays
//! cached until the pool needs room, and then the least recently used leaf goes first. Pages
//! referenced by live sequences are never evicted (the caller says which pages are evictable).
//! With an event sink, pages entering and leaving the tree are reported (`super::events`).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use super::events::{block_hash, BlockHash, KvEvent, KvEventSink};
use super::page_pool::PageId;

/// What the KV manager needs from a prefix cache; [`NoPrefixCache`] turns sharing off.
pub trait PrefixCache: Send {
    /// Pages of the longest run of cached full pages that prefix `tokens`; marks them used now.
    fn match_prefix(&mut self, tokens: &[u32]) -> Vec<PageId>;
    /// Record full pages (`tokens.len() == pages.len() * page_size`, starting at position 0),
    /// of which the first `already_cached` came from this cache before (so a long sequence
    /// does not walk its whole path again for every new page). Returns, for each page of
    /// `pages[already_cached..]`, the page the cache holds for that prefix: the page itself,
    /// or an equal page cached earlier (another sequence computed the same prefix first).
    fn insert(&mut self, tokens: &[u32], pages: &[PageId], already_cached: usize) -> Vec<PageId>;
    fn contains(&self, page: PageId) -> bool;
    /// Drop the least recently used leaf whose page `is_evictable`, and return that page.
    fn evict_one(&mut self, is_evictable: &dyn Fn(PageId) -> bool) -> Option<PageId>;
    fn num_cached_pages(&self) -> usize;
    /// Every cached page (for accounting checks).
    fn cached_pages(&self) -> Vec<PageId>;
    /// Report pages entering and leaving the cache to `sink` from now on (a cache that
    /// keeps nothing has nothing to report).
    fn set_event_sink(&mut self, _sink: Box<dyn KvEventSink>) {}
}

/// Prefix caching disabled: nothing is ever shared or kept.
#[derive(Debug, Default)]
pub struct NoPrefixCache;

impl PrefixCache for NoPrefixCache {
    fn match_prefix(&mut self, _tokens: &[u32]) -> Vec<PageId> {
        Vec::new()
    }
    fn insert(&mut self, _tokens: &[u32], pages: &[PageId], already_cached: usize) -> Vec<PageId> {
        pages[already_cached.min(pages.len())..].to_vec()
    }
    fn contains(&self, _page: PageId) -> bool {
        false
    }
    fn evict_one(&mut self, _is_evictable: &dyn Fn(PageId) -> bool) -> Option<PageId> {
        None
    }
    fn num_cached_pages(&self) -> usize {
        0
    }
    fn cached_pages(&self) -> Vec<PageId> {
        Vec::new()
    }
}

type NodeId = usize;
const ROOT: NodeId = 0;

#[derive(Debug)]
struct Node {
    parent: NodeId,
    key: Vec<u32>,
    page: PageId,
    /// Names the prefix that ends with this page (`events::block_hash`).
    hash: BlockHash,
    children: HashMap<Vec<u32>, NodeId>,
    last_used: u64,
}

/// The optional sink, so that the cache stays `Debug`.
struct Events(Option<Box<dyn KvEventSink>>);

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Events(on)"
        } else {
            "Events(off)"
        })
    }
}

impl Events {
    fn emit(&mut self, event: impl FnOnce() -> KvEvent) {
        if let Some(sink) = &mut self.0 {
            sink.emit(event());
        }
    }
}

/// Pages one `insert` added: they form one run below `parent` (a new node has no children,
/// so every page after the first new one is new too).
struct StoredRun {
    parent: Option<BlockHash>,
    hashes: Vec<BlockHash>,
    tokens: Vec<u32>,
}

#[derive(Debug)]
pub struct RadixCache {
    page_size: usize,
    /// Arena; slots of evicted nodes are on `free_slots` and get reused.
    nodes: Vec<Node>,
    free_slots: Vec<NodeId>,
    page_to_node: HashMap<PageId, NodeId>,
    /// Leaves (nodes without children, root excluded) ordered by last use: eviction candidates.
    leaves: BTreeSet<(u64, NodeId)>,
    clock: u64,
    events: Events,
}

impl RadixCache {
    pub fn new(page_size: usize) -> Self {
        let root = Node {
            parent: ROOT,
            key: Vec::new(),
            page: PageId::MAX,
            hash: 0,
            children: HashMap::new(),
            last_used: 0,
        };
        Self {
            page_size,
            nodes: vec![root],
            free_slots: Vec::new(),
            page_to_node: HashMap::new(),
            leaves: BTreeSet::new(),
            clock: 0,
            events: Events(None),
        }
    }

    /// The hash of the prefix ending at `id` (`None` for the root: nothing before).
    fn prefix_hash(&self, id: NodeId) -> Option<BlockHash> {
        (id != ROOT).then(|| self.node(id).hash)
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id]
    }

    fn touch(&mut self, id: NodeId, now: u64) {
        let old = self.node(id).last_used;
        if self.leaves.remove(&(old, id)) {
            self.leaves.insert((now, id));
        }
        self.node_mut(id).last_used = now;
    }

    fn add_child(&mut self, parent: NodeId, key: &[u32], page: PageId, now: u64) -> NodeId {
        let node = Node {
            parent,
            key: key.to_vec(),
            page,
            hash: block_hash(self.prefix_hash(parent), key),
            children: HashMap::new(),
            last_used: now,
        };
        let id = match self.free_slots.pop() {
            Some(slot) => {
                self.nodes[slot] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        let parent_node = self.node_mut(parent);
        let parent_was_leaf = parent_node.children.is_empty();
        parent_node.children.insert(key.to_vec(), id);
        let parent_used = parent_node.last_used;
        if parent_was_leaf && parent != ROOT {
            self.leaves.remove(&(parent_used, parent));
        }
        self.leaves.insert((now, id));
        self.page_to_node.insert(page, id);
        id
    }

    fn remove_leaf(&mut self, id: NodeId) -> PageId {
        let node = self.node_mut(id);
        let (key, page, parent_id, last_used) = (
            std::mem::take(&mut node.key),
            node.page,
            node.parent,
            node.last_used,
        );
        self.leaves.remove(&(last_used, id));
        self.page_to_node.remove(&page);
        self.free_slots.push(id);
        let parent = self.node_mut(parent_id);
        parent.children.remove(&key);
        let parent_is_leaf = parent.children.is_empty();
        // A path is used as a whole: a parent was in use at least as late as its children.
        parent.last_used = parent.last_used.max(last_used);
        let parent_used = parent.last_used;
        if parent_is_leaf && parent_id != ROOT {
            self.leaves.insert((parent_used, parent_id));
        }
        page
    }
}

impl PrefixCache for RadixCache {
    fn match_prefix(&mut self, tokens: &[u32]) -> Vec<PageId> {
        self.clock += 1;
        let now = self.clock;
        let mut pages = Vec::new();
        let mut current = ROOT;
        for chunk in tokens.chunks_exact(self.page_size) {
            let Some(&child) = self.node(current).children.get(chunk) else {
                break;
            };
            self.touch(child, now);
            pages.push(self.node(child).page);
            current = child;
        }
        pages
    }

    fn insert(&mut self, tokens: &[u32], pages: &[PageId], already_cached: usize) -> Vec<PageId> {
        debug_assert_eq!(tokens.len(), pages.len() * self.page_size);
        self.clock += 1;
        let now = self.clock;
        // Resume below the last page cached before; from the root if that is unknown.
        let resume = already_cached.checked_sub(1).and_then(|last| {
            self.page_to_node
                .get(&pages[last])
                .map(|&node| (node, last + 1))
        });
        let (mut current, first) = resume.unwrap_or((ROOT, 0));
        let mut canonical = Vec::with_capacity(pages.len() - first);
        let mut stored: Option<StoredRun> = None;
        let new_pages = tokens.chunks_exact(self.page_size).zip(pages).skip(first);
        for (chunk, &page) in new_pages {
            let existing = self.node(current).children.get(chunk).copied();
            current = match existing {
                Some(child) => {
                    self.touch(child, now);
                    child
                }
                None if self.page_to_node.contains_key(&page) => {
                    // The page already spells another prefix: the caller broke the contract.
                    // Keeping the cache consistent matters more than caching this page.
                    tracing::error!(page, "page inserted into the prefix cache twice");
                    canonical.extend_from_slice(&pages[first + canonical.len()..]);
                    break;
                }
                None => {
                    let parent = self.prefix_hash(current);
                    let child = self.add_child(current, chunk, page, now);
                    let run = stored.get_or_insert_with(|| StoredRun {
                        parent,
                        hashes: Vec::new(),
                        tokens: Vec::new(),
                    });
                    run.hashes.push(self.node(child).hash);
                    run.tokens.extend_from_slice(chunk);
                    child
                }
            };
            canonical.push(self.node(current).page);
        }
        if let Some(run) = stored {
            let block_size = self.page_size;
            self.events.emit(|| KvEvent::BlockStored {
                block_hashes: run.hashes,
                parent_block_hash: run.parent,
                token_ids: run.tokens,
                block_size,
            });
        }
        // Pages before `first` are the caller's business; report only those asked about.
        let skip = already_cached.saturating_sub(first);
        canonical.split_off(skip.min(canonical.len()))
    }

    fn contains(&self, page: PageId) -> bool {
        self.page_to_node.contains_key(&page)
    }

    fn evict_one(&mut self, is_evictable: &dyn Fn(PageId) -> bool) -> Option<PageId> {
        let victim = self
            .leaves
            .iter()
            .map(|&(_, id)| id)
            .find(|&id| is_evictable(self.node(id).page))?;
        let hash = self.node(victim).hash;
        self.events.emit(|| KvEvent::BlockRemoved {
            block_hashes: vec![hash],
        });
        Some(self.remove_leaf(victim))
    }

    fn num_cached_pages(&self) -> usize {
        self.page_to_node.len()
    }

    fn cached_pages(&self) -> Vec<PageId> {
        self.page_to_node.keys().copied().collect()
    }

    fn set_event_sink(&mut self, sink: Box<dyn KvEventSink>) {
        self.events = Events(Some(sink));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: usize, offset: u32) -> Vec<u32> {
        (0..n as u32).map(|t| t + offset).collect()
    }

    #[test]
    fn matches_only_full_cached_pages_of_the_prefix() {
        let mut cache = RadixCache::new(4);
        let seq = tokens(10, 0);
        // Only the first 8 tokens (2 full pages) can be inserted.
        assert_eq!(cache.insert(&seq[..8], &[7, 3], 0), vec![7, 3]);
        assert_eq!(cache.match_prefix(&seq), vec![7, 3]);
        assert_eq!(cache.match_prefix(&seq[..7]), vec![7]);
        let mut diverging = seq.clone();
        diverging[5] = 99;
        assert_eq!(cache.match_prefix(&diverging), vec![7]);
        assert_eq!(cache.match_prefix(&tokens(8, 1)), Vec::<PageId>::new());
    }

    #[test]
    fn insert_of_an_already_cached_prefix_returns_the_cached_pages() {
        let mut cache = RadixCache::new(2);
        let seq = tokens(6, 0);
        cache.insert(&seq[..4], &[1, 2], 0);
        assert_eq!(cache.insert(&seq, &[5, 6, 7], 0), vec![1, 2, 7]);
        assert_eq!(cache.num_cached_pages(), 3);
        assert!(!cache.contains(5) && cache.contains(7));
        // Resuming after pages cached before gives the same answer for the new ones.
        let longer = tokens(10, 0);
        assert_eq!(cache.insert(&longer, &[1, 2, 7, 8, 9], 3), vec![8, 9]);
        assert_eq!(cache.match_prefix(&longer), vec![1, 2, 7, 8, 9]);
        assert_eq!(cache.insert(&longer, &[1, 2, 7, 8, 9], 2), vec![7, 8, 9]);
        // A last cached page the cache does not know (42): walk from the root instead.
        assert_eq!(cache.insert(&longer, &[1, 2, 42, 8, 9], 3), vec![8, 9]);
    }

    #[test]
    fn evicts_least_recently_used_leaves_first_and_skips_pinned_pages() {
        let mut cache = RadixCache::new(1);
        // Two branches sharing page 0: [0, 1, 2] -> pages 10, 11, 12 and [0, 5] -> pages 10, 15.
        cache.insert(&[0, 1, 2], &[10, 11, 12], 0);
        cache.insert(&[0, 5], &[10, 15], 0);
        // Use the first branch again: the second branch's leaf is now the oldest.
        cache.match_prefix(&[0, 1, 2]);
        let all = |_: PageId| true;
        assert_eq!(cache.evict_one(&all), Some(15));
        // Page 12 pinned: nothing else is a leaf, so nothing can go.
        let not_12 = |p: PageId| p != 12;
        assert_eq!(cache.evict_one(&not_12), None);
        assert_eq!(cache.evict_one(&all), Some(12));
        assert_eq!(cache.evict_one(&all), Some(11));
        assert_eq!(cache.evict_one(&all), Some(10));
        assert_eq!(cache.evict_one(&all), None);
        assert_eq!(cache.num_cached_pages(), 0);
        // Freed node slots are reused and the tree still works.
        cache.insert(&[3, 4], &[1, 2], 0);
        assert_eq!(cache.match_prefix(&[3, 4, 9]), vec![1, 2]);
    }
}
