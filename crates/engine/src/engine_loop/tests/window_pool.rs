//! The sliding-window layers' own pool (`kv::window_pages`): a long sequence holds only its
//! window and a step's pages of it, the rest go back as it advances; a later turn still starts
//! from the cache; and where the pool is too small to keep the window of a hit, the hit is cut
//! to what is kept, never served from a released page (the fake backend reads every window
//! back).

use std::sync::atomic::Ordering;

use crate::kv::NULL_WINDOW_PAGE;
use crate::testing::fake_backend::expected_greedy;
use crate::testing::harness::{greedy, request, Harness, Setup};

fn prompt(len: usize, salt: u32) -> Vec<u32> {
    (0..len as u32).map(|i| (i * 7 + salt) % 31).collect()
}

fn windowed(window: usize, window_pages: usize) -> Setup {
    Setup {
        page_size: 4,
        budget: 16,
        window: Some((window, window_pages)),
        ..Setup::default()
    }
}

#[test]
fn a_long_sequence_holds_its_window_and_a_step_of_pages() {
    // Window 10 over pages of 4: between steps, the pages of the next query's 9 keys behind
    // it (3 pages, 4 where they straddle one more); a step adds only the pages it writes.
    let mut harness = Harness::new(windowed(10, 64), vec![]);
    let text = prompt(100, 1);
    harness.add(request(1, text.clone(), greedy(40)));
    let mut most = 0;
    while harness.core.has_work() {
        harness.step();
        if let Some(s) = harness.core.scheduler().running().first() {
            let held = s
                .window_table
                .iter()
                .filter(|&&p| p != NULL_WINDOW_PAGE)
                .count();
            most = most.max(held);
            assert!(s.block_table.len() * 4 >= s.num_computed);
            // /metrics sees the window pool: what this sequence holds, of 64 pages.
            let stats = &harness.stats;
            assert_eq!(stats.window_pages_used.load(Ordering::Relaxed), held);
            assert_eq!(stats.window_pages_total.load(Ordering::Relaxed), 64);
        }
    }
    assert!(most <= 4, "held {most} window pages");
    assert!(most >= 3, "held {most}: the window was never full");
    assert_eq!(harness.received[&1].tokens, expected_greedy(&text, 40, &[]));
}

#[test]
fn the_next_turn_hits_the_cache_with_the_window_kept() {
    let mut harness = Harness::new(windowed(10, 64), vec![]);
    let turn1 = prompt(60, 2);
    harness.add(request(1, turn1.clone(), greedy(9)));
    harness.run_to_completion();
    let mut turn2 = turn1.clone();
    turn2.extend(&harness.received[&1].tokens);
    turn2.extend([5, 6]);
    harness.add(request(2, turn2.clone(), greedy(5)));
    harness.run_to_completion();
    // 60 + 9 tokens, 68 computed: 17 full pages, all usable.
    assert_eq!(harness.received[&2].num_cached_tokens, 68);
    assert_eq!(harness.received[&2].tokens, expected_greedy(&turn2, 5, &[]));
}

#[test]
fn a_hit_stops_where_the_window_was_given_up() {
    // 10 window pages: one sequence's least (3 + 2 + 4 = 9) and one to spare, so most of
    // what the first turn kept is given up to the second request's own steps.
    let mut harness = Harness::new(windowed(10, 10), vec![]);
    let turn1 = prompt(60, 3);
    harness.add(request(1, turn1.clone(), greedy(1)));
    harness.run_to_completion();
    harness.add(request(2, prompt(50, 9), greedy(1)));
    harness.run_to_completion();
    let mut turn2 = turn1.clone();
    turn2.extend([5, 6, 7, 8, 9]);
    harness.add(request(3, turn2.clone(), greedy(4)));
    harness.run_to_completion();
    let cached = harness.received[&3].num_cached_tokens;
    assert!(
        cached < 60,
        "{cached} cached tokens: a hit past the kept window"
    );
    assert_eq!(harness.received[&3].tokens, expected_greedy(&turn2, 4, &[]));
}
