//! KV-cache events: what the prefix cache tells the outside world about the blocks it holds,
//! so that a KV-aware router (llm-d's endpoint picker, NVIDIA Dynamo) can send a request
//! where its prefix is cached. The engine only produces them through a [`KvEventSink`]; how
//! they travel (vLLM's ZMQ + msgpack format) is the server's business.
//!
//! A block is one full KV page. `BlockStored` is emitted when full pages enter the prefix
//! cache (the pages of one sequence's newly cached run, in order, as one event), and
//! `BlockRemoved` when the cache evicts a page to reuse it. Pages a sequence holds without
//! publishing them (its partial last page) are never reported: no other request can hit
//! them. With prefix caching off nothing is cached and nothing is reported.
//!
//! Block hashing ([`block_hash`]): a block's hash names its whole prefix, not only its own
//! tokens: FNV-1a (64 bit) over the parent block's hash (8 bytes, little-endian; absent for a
//! sequence's first block) followed by the block's token ids (4 bytes each, little-endian).
//! Equal prefixes therefore have equal hashes on every replica and across restarts, and a
//! consumer can recompute them from the token ids in `BlockStored`.

/// A block's hash, as [`block_hash`] computes it.
pub type BlockHash = u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEvent {
    /// Consecutive full blocks entered the cache; `parent_block_hash` is the cached block
    /// before the first of them (`None`: they start the sequence).
    BlockStored {
        block_hashes: Vec<BlockHash>,
        parent_block_hash: Option<BlockHash>,
        /// The blocks' tokens, `block_size` per block, in order.
        token_ids: Vec<u32>,
        block_size: usize,
    },
    /// Blocks left the cache (evicted to make room).
    BlockRemoved { block_hashes: Vec<BlockHash> },
    /// Every block left the cache.
    AllBlocksCleared,
}

/// Where the prefix cache sends its events. Called on the scheduler thread in the middle of
/// a step: an implementation must not block (queue and return).
pub trait KvEventSink: Send + std::fmt::Debug {
    fn emit(&mut self, event: KvEvent);
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of the block holding `tokens` after the block hashed `parent` (module docs).
pub fn block_hash(parent: Option<BlockHash>, tokens: &[u32]) -> BlockHash {
    let mut hash = FNV_OFFSET;
    if let Some(parent) = parent {
        hash = fnv1a(hash, &parent.to_le_bytes());
    }
    for token in tokens {
        hash = fnv1a(hash, &token.to_le_bytes());
    }
    hash
}

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::radix_cache::{PrefixCache, RadixCache};
    use super::*;

    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<KvEvent>>>);

    impl KvEventSink for Recorder {
        fn emit(&mut self, event: KvEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    impl Recorder {
        fn take(&self) -> Vec<KvEvent> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    #[test]
    fn the_radix_cache_reports_each_new_run_once_and_each_eviction() {
        let recorder = Recorder::default();
        let mut cache = RadixCache::new(2);
        cache.set_event_sink(Box::new(recorder.clone()));
        let h1 = block_hash(None, &[1, 2]);
        let h2 = block_hash(Some(h1), &[3, 4]);
        cache.insert(&[1, 2, 3, 4], &[10, 11], 0);
        let stored = KvEvent::BlockStored {
            block_hashes: vec![h1, h2],
            parent_block_hash: None,
            token_ids: vec![1, 2, 3, 4],
            block_size: 2,
        };
        assert_eq!(recorder.take(), vec![stored]);
        // The same prefix again (another sequence computed it): nothing new is cached.
        cache.insert(&[1, 2, 3, 4], &[20, 21], 0);
        assert_eq!(recorder.take(), vec![]);
        // A branch below the first page: one block, its parent named.
        cache.insert(&[1, 2, 7, 8], &[10, 12], 1);
        let h3 = block_hash(Some(h1), &[7, 8]);
        let branch = KvEvent::BlockStored {
            block_hashes: vec![h3],
            parent_block_hash: Some(h1),
            token_ids: vec![7, 8],
            block_size: 2,
        };
        assert_eq!(recorder.take(), vec![branch]);
        // Lookups report nothing; evictions report the evicted block, oldest leaf first.
        cache.match_prefix(&[1, 2, 7, 8]);
        assert_eq!(recorder.take(), vec![]);
        assert_eq!(cache.evict_one(&|_| true), Some(11));
        assert_eq!(cache.evict_one(&|_| true), Some(12));
        assert_eq!(cache.evict_one(&|_| true), Some(10));
        let removed = |h| KvEvent::BlockRemoved {
            block_hashes: vec![h],
        };
        assert_eq!(recorder.take(), vec![removed(h2), removed(h3), removed(h1)]);
        assert_eq!(cache.evict_one(&|_| true), None);
        assert_eq!(recorder.take(), vec![]);
    }

    #[test]
    fn the_hash_is_fnv1a_over_parent_and_tokens_little_endian() {
        // The published FNV-1a 64 test vectors: "" and "a".
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        // Token 0x61 is the bytes 61 00 00 00 (computed independently, in Python).
        assert_eq!(block_hash(None, &[0x61]), 0xac80_4b82_0e4f_e984);
        let parent: BlockHash = 0x0102_0304_0506_0708;
        let mut bytes = parent.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0x61, 0, 0, 0]);
        assert_eq!(block_hash(Some(parent), &[0x61]), fnv1a(FNV_OFFSET, &bytes));
    }

    #[test]
    fn a_hash_names_the_whole_prefix() {
        let first = block_hash(None, &[1, 2]);
        assert_eq!(first, block_hash(None, &[1, 2]));
        assert_ne!(block_hash(Some(first), &[3, 4]), block_hash(None, &[3, 4]));
        let other_first = block_hash(None, &[9, 2]);
        assert_ne!(
            block_hash(Some(first), &[3, 4]),
            block_hash(Some(other_first), &[3, 4])
        );
    }
}
