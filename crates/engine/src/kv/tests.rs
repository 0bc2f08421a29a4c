//! The KV manager's page accounting: sharing, eviction, duplicates, and the window pool.

use super::*;

#[test]
fn shared_prefix_pages_survive_release_and_are_evicted_when_needed() {
    let mut kv = KvManager::new(4, 2, true);
    let tokens = [1, 2, 3, 4, 5];
    let mut table = kv.allocate(3).unwrap();
    assert_eq!(kv.publish_full_pages(&tokens, &mut table, &[], 5, 0), 2);
    kv.release(&table);
    // Two full pages stay cached, the partial third page is free again.
    assert_eq!(kv.num_available(), 4);
    kv.check_accounting([]).unwrap();
    let shared = kv.acquire_prefix(&tokens[..4]);
    assert_eq!(shared, table[..2].to_vec());
    kv.check_accounting([shared.as_slice()]).unwrap();
    // Only 2 pages can be had while the shared ones are referenced.
    assert!(kv.allocate(3).is_none());
    kv.release(&shared);
    let all = kv.allocate(4).unwrap();
    kv.check_accounting([all.as_slice()]).unwrap();
    assert_eq!(kv.acquire_prefix(&tokens), Vec::<PageId>::new());
}

#[test]
fn duplicate_pages_are_replaced_by_the_cached_ones() {
    let mut kv = KvManager::new(4, 2, true);
    let tokens = [7, 8, 9];
    let mut first = kv.allocate(2).unwrap();
    let mut second = kv.allocate(2).unwrap();
    kv.publish_full_pages(&tokens, &mut first, &[], 3, 0);
    kv.publish_full_pages(&tokens, &mut second, &[], 3, 0);
    assert_eq!(second[0], first[0]);
    assert_ne!(second[1], first[1]);
    kv.check_accounting([first.as_slice(), second.as_slice()])
        .unwrap();
    assert_eq!(kv.num_available(), 1);
}

#[test]
fn without_prefix_caching_released_pages_are_free() {
    let mut kv = KvManager::new(2, 1, false);
    let mut table = kv.allocate(2).unwrap();
    kv.publish_full_pages(&[1, 2], &mut table, &[], 2, 0);
    kv.release(&table);
    assert_eq!(kv.acquire_prefix(&[1, 2]), Vec::<PageId>::new());
    assert_eq!(kv.num_available(), 2);
    kv.check_accounting([]).unwrap();
}
