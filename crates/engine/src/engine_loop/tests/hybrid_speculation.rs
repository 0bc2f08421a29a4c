//! Speculative decoding on a model with recurrent state (the fake model's, which checks the
//! state each step continues from against the sequence's history): a rejected draft is taken
//! back out of the state, greedy output is plain greedy output for every proposer, and
//! speculation leaves the prefix cache every snapshot that plain decoding leaves.

use super::speculative::{harness, prompts, Method};
use crate::testing::fake_backend::expected_greedy;
use crate::testing::harness::{greedy, request, Harness, Setup};

fn hybrid(page_size: usize, num_pages: usize, snapshots: usize) -> Setup {
    Setup {
        page_size,
        num_pages,
        recurrent: Some((snapshots, 16)),
        ..Setup::default()
    }
}

#[test]
fn greedy_output_is_plain_greedy_with_recurrent_state() {
    let setups = [
        hybrid(16, 256, 32),
        hybrid(1, 4096, 0),
        // Few pages: sequences are preempted and start again from a snapshot or from zero.
        Setup {
            budget: 64,
            ..hybrid(4, 24, 4)
        },
    ];
    for setup in setups {
        for method in [
            Method::Ngram,
            Method::Suffix,
            Method::PerfectDraft,
            Method::Draft,
        ] {
            for k in [1, 4] {
                let mut h = harness(setup, vec![], method, k);
                let prompts = prompts(8, 7);
                for (i, p) in prompts.iter().enumerate() {
                    h.add(request(i as u64, p.clone(), greedy(30)));
                }
                h.run_to_completion();
                for (i, p) in prompts.iter().enumerate() {
                    assert_eq!(
                        h.received[&(i as u64)].tokens,
                        expected_greedy(p, 30, &[]),
                        "{method:?} k={k} {setup:?} request {i}"
                    );
                }
                let counters = &h.core.speculation().unwrap().counters;
                assert!(counters.num_draft_tokens > 0, "{method:?}: nothing drafted");
                if let Method::Draft = method {
                    assert!(
                        counters.num_accepted_tokens < counters.num_draft_tokens,
                        "no draft was rejected: nothing was rewound"
                    );
                }
            }
        }
    }
}

#[test]
fn speculation_leaves_every_snapshot_plain_decoding_leaves() {
    // Turn 2's prompt is turn 1's prompt and answer and one more token: it starts from the
    // deepest snapshot, which a step ending on each multiple of 16 saved (the scheduler's
    // tests check that drafts stop short of those points). Not so with a draft model: pages
    // are published once its cache holds them, which it does only after the saving step, and
    // a snapshot is kept only with a published page.
    let cached_in_turn_2 = |speculate: bool| {
        let setup = hybrid(16, 256, 16);
        let mut h = if speculate {
            harness(setup, vec![], Method::Suffix, 4)
        } else {
            Harness::new(setup, vec![])
        };
        let first: Vec<u32> = prompts(1, 3)[0].clone();
        h.add(request(0, first.clone(), greedy(61)));
        h.run_to_completion();
        let mut second = first.clone();
        second.extend(&h.received[&0].tokens);
        second.push(5);
        h.add(request(1, second.clone(), greedy(4)));
        h.run_to_completion();
        assert_eq!(h.received[&1].tokens, expected_greedy(&second, 4, &[]));
        (h.received[&1].num_cached_tokens, first.len() + 61 - 1)
    };
    let (plain, computed) = cached_in_turn_2(false);
    assert_eq!(
        plain,
        computed / 16 * 16,
        "plain decoding's deepest snapshot"
    );
    assert_eq!(cached_in_turn_2(true).0, plain);
}
