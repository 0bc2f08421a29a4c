use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::request::{FinishReason, RequestId, SamplingParams};
use crate::testing::fake_backend::{expected_greedy, logits_for_history, FakeBackend};
use crate::testing::harness::{greedy, request, Harness, Received, Setup};

/// A prompt of `len` tokens: `shared` tokens of a common prefix, then ones unique to `salt`.
fn prompt(len: usize, shared: usize, salt: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| {
            if (i as usize) < shared {
                (i * 7) % 31
            } else {
                (i * 13 + salt * 5) % 32
            }
        })
        .collect()
}

fn sampled(max_tokens: usize, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 0.9,
        top_p: 0.9,
        top_k: 20,
        seed: Some(seed),
        max_tokens,
        logprobs: Some(2),
        ..SamplingParams::default()
    }
}

/// A mixed workload: shared prefixes, long prompts, greedy and seeded sampling.
fn workload() -> Vec<(RequestId, Vec<u32>, SamplingParams)> {
    (0..12u64)
        .map(|id| {
            let len = 5 + (id as usize * 17) % 60;
            let params = if id % 2 == 0 {
                greedy(12 + id as usize)
            } else {
                sampled(10, id)
            };
            (id, prompt(len, len.min(35), id as u32), params)
        })
        .collect()
}

fn run(setup: Setup, eos: Vec<u32>) -> (HashMap<RequestId, Received>, Harness) {
    let mut harness = Harness::new(setup, eos);
    for (id, prompt, params) in workload() {
        harness.add(request(id, prompt, params));
    }
    harness.run_to_completion();
    let tokens = harness
        .received
        .iter()
        .map(|(&id, r)| {
            let mut r = r.clone();
            // Which step and how much was cached depend on the setup; tokens must not.
            (r.first_step, r.token_steps, r.num_cached_tokens) = (0, Vec::new(), 0);
            (id, r)
        })
        .collect();
    (tokens, harness)
}

#[test]
fn greedy_outputs_match_the_model_oracle() {
    let (received, _) = run(Setup::default(), vec![]);
    for (id, prompt, params) in workload() {
        let got = &received[&id];
        assert_eq!(got.tokens.len(), params.max_tokens);
        assert_eq!(got.finish, Some(FinishReason::Length));
        if params.temperature == 0.0 {
            assert_eq!(
                got.tokens,
                expected_greedy(&prompt, params.max_tokens, &[]),
                "id {id}"
            );
        }
    }
}

#[test]
fn preemption_prefix_caching_chunking_and_page_size_do_not_change_outputs() {
    let (reference, _) = run(Setup::default(), vec![]);
    let tiny = Setup {
        num_pages: 6,
        ..Setup::default()
    };
    let (got, harness) = run(tiny, vec![]);
    assert!(harness.stats.num_preemptions_total.load(Ordering::Relaxed) > 0);
    assert_eq!(got, reference, "tiny pool");
    let (got, harness) = run(
        Setup {
            num_pages: 90,
            page_size: 1,
            budget: 7,
            ..tiny
        },
        vec![],
    );
    assert!(harness.stats.num_preemptions_total.load(Ordering::Relaxed) > 0);
    assert_eq!(got, reference, "tiny pool, page size 1, budget 7");
    let (got, harness) = run(
        Setup {
            budget: 7,
            ..Setup::default()
        },
        vec![],
    );
    assert!(
        harness
            .stats
            .prefix_cache_hits_total
            .load(Ordering::Relaxed)
            > 0
    );
    assert_eq!(got, reference, "budget 7");
    let no_cache = Setup {
        prefix_caching: false,
        ..Setup::default()
    };
    let (got, harness) = run(no_cache, vec![]);
    assert_eq!(
        harness
            .stats
            .prefix_cache_hits_total
            .load(Ordering::Relaxed),
        0
    );
    assert_eq!(got, reference, "prefix caching off");
    let (got, _) = run(
        Setup {
            max_seqs: 1,
            budget: 3,
            page_size: 1,
            ..Setup::default()
        },
        vec![],
    );
    assert_eq!(got, reference, "one at a time");
}

#[test]
fn a_shared_1000_token_prefix_is_served_from_the_cache() {
    let mut harness = Harness::new(Setup::default(), vec![]);
    let first = prompt(1000, 1000, 0);
    harness.add(request(1, first.clone(), greedy(4)));
    harness.run_to_completion();
    let mut second = first.clone();
    second.extend([1, 2, 3]);
    harness.add(request(2, second.clone(), greedy(4)));
    harness.add(request(3, first.clone(), greedy(4)));
    harness.run_to_completion();
    // 1003 tokens: 62 full pages of the common 1000 (the 63rd page is partial).
    assert_eq!(harness.received[&2].num_cached_tokens, 992);
    // The same 1000 tokens: the last one is recomputed for its logits, so 62 pages again.
    assert_eq!(harness.received[&3].num_cached_tokens, 992);
    assert_eq!(
        harness.received[&2].tokens,
        expected_greedy(&second, 4, &[])
    );
    assert_eq!(harness.received[&3].tokens, harness.received[&1].tokens);
}

#[test]
fn generated_tokens_are_cached_for_the_next_turn() {
    let mut harness = Harness::new(
        Setup {
            page_size: 4,
            ..Setup::default()
        },
        vec![],
    );
    let turn1 = prompt(10, 0, 3);
    harness.add(request(1, turn1.clone(), greedy(9)));
    harness.run_to_completion();
    let mut turn2 = turn1.clone();
    turn2.extend(&harness.received[&1].tokens);
    turn2.extend([5, 6]);
    harness.add(request(2, turn2.clone(), greedy(3)));
    harness.run_to_completion();
    // 10 + 9 tokens, of which 18 were computed (the last sample never was): 4 full pages.
    assert_eq!(harness.received[&2].num_cached_tokens, 16);
    assert_eq!(harness.received[&2].tokens, expected_greedy(&turn2, 3, &[]));
}

fn reference_logprob(history: &[u32], token: u32) -> f64 {
    let logits = logits_for_history(history.iter().copied());
    let max = logits.iter().copied().fold(f32::MIN, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    logits[token as usize] as f64 - max - sum.ln()
}

#[test]
fn prompt_logprobs_skip_the_cache_and_match_the_model() {
    let mut harness = Harness::new(
        Setup {
            page_size: 2,
            budget: 3,
            ..Setup::default()
        },
        vec![],
    );
    let text = prompt(9, 9, 0);
    harness.add(request(1, text.clone(), greedy(2)));
    harness.run_to_completion();
    let params = SamplingParams {
        prompt_logprobs: Some(3),
        logprobs: Some(1),
        ..greedy(2)
    };
    harness.add(request(2, text.clone(), params));
    harness.run_to_completion();
    let got = &harness.received[&2];
    assert_eq!(got.num_cached_tokens, 0);
    let entries = got.prompt_logprobs.as_ref().expect("prompt logprobs");
    assert_eq!(entries.len(), text.len());
    assert!(entries[0].is_none());
    for (i, entry) in entries.iter().enumerate().skip(1) {
        let entry = entry.as_ref().unwrap();
        assert_eq!(entry.token, text[i]);
        assert!((entry.logprob as f64 - reference_logprob(&text[..i], text[i])).abs() < 1e-4);
        assert_eq!(entry.top.len(), 3);
    }
    let mut history = text.clone();
    for lp in &got.logprobs {
        assert!((lp.logprob as f64 - reference_logprob(&history, lp.token)).abs() < 1e-4);
        history.push(lp.token);
    }
    assert_eq!(got.logprobs.len(), 2);
}

#[test]
fn eos_stop_tokens_ignore_eos_and_context_limit() {
    let text = prompt(8, 0, 1);
    let free_run = expected_greedy(&text, 12, &[]);
    let eos = free_run[3];
    let setup = Setup {
        max_context: 8 + 6,
        ..Setup::default()
    };
    let mut harness = Harness::new(setup, vec![eos]);
    harness.add(request(1, text.clone(), greedy(12)));
    harness.add(request(
        2,
        text.clone(),
        SamplingParams {
            ignore_eos: true,
            ..greedy(12)
        },
    ));
    let stop = SamplingParams {
        ignore_eos: true,
        stop_token_ids: vec![free_run[1]],
        ..greedy(12)
    };
    harness.add(request(3, text.clone(), stop));
    harness.add(request(4, prompt(14, 0, 1), greedy(3)));
    harness.add(request(5, vec![], greedy(3)));
    harness.add(request(6, vec![1, 99], greedy(3)));
    harness.run_to_completion();
    let r = &harness.received;
    let first_eos = free_run.iter().position(|&t| t == eos).unwrap();
    assert_eq!(r[&1].tokens, free_run[..=first_eos].to_vec());
    assert_eq!(r[&1].finish, Some(FinishReason::Stop));
    // The context holds 14 tokens: 6 new ones at most.
    assert_eq!(r[&2].tokens, free_run[..6].to_vec());
    assert_eq!(r[&2].finish, Some(FinishReason::Length));
    let first_stop = free_run.iter().position(|&t| t == free_run[1]).unwrap();
    assert_eq!(r[&3].tokens, free_run[..=first_stop].to_vec());
    assert_eq!(r[&3].finish, Some(FinishReason::Stop));
    assert_eq!(
        (r[&4].tokens.len(), r[&4].finish),
        (0, Some(FinishReason::Length))
    );
    assert_eq!(r[&5].finish, Some(FinishReason::Abort));
    assert_eq!(r[&6].finish, Some(FinishReason::Abort));
}

#[test]
fn aborts_free_pages_at_once_and_end_with_an_abort_output() {
    let mut harness = Harness::new(
        Setup {
            max_seqs: 1,
            ..Setup::default()
        },
        vec![],
    );
    harness.add(request(1, prompt(40, 0, 1), greedy(100)));
    harness.add(request(2, prompt(40, 0, 2), greedy(100)));
    harness.step();
    harness.step();
    assert!(harness.core.scheduler().kv().num_referenced() > 0);
    harness.core.abort(2); // waiting
    harness.core.abort(1); // running
    harness.core.abort(77); // unknown: ignored
    assert_eq!(harness.core.scheduler().kv().num_referenced(), 0);
    harness.run_to_completion();
    assert_eq!(harness.received[&1].finish, Some(FinishReason::Abort));
    assert_eq!(harness.received[&1].tokens.len(), 2);
    assert_eq!(harness.received[&2].finish, Some(FinishReason::Abort));
    assert_eq!(harness.received.len(), 2);
}

#[test]
fn a_failed_or_panicking_forward_aborts_its_batch_and_the_engine_keeps_serving() {
    let mut backend = FakeBackend::new(4096);
    backend.fail_at_call = Some(1);
    backend.panic_at_call = Some(3);
    let mut harness = Harness::with_backend(Setup::default(), vec![], backend);
    harness.add(request(1, prompt(20, 0, 1), greedy(5)));
    harness.step();
    harness.add(request(2, prompt(20, 0, 2), greedy(5)));
    harness.step(); // fails: both were in it
    harness.add(request(3, prompt(20, 0, 3), greedy(5)));
    harness.step();
    harness.step(); // panics: 3 was in it
    harness.add(request(4, prompt(20, 0, 4), greedy(5)));
    harness.run_to_completion();
    let r = &harness.received;
    assert_eq!(
        (r[&1].tokens.len(), r[&1].finish),
        (1, Some(FinishReason::Abort))
    );
    assert_eq!(
        (r[&2].tokens.len(), r[&2].finish),
        (0, Some(FinishReason::Abort))
    );
    assert_eq!(
        (r[&3].tokens.len(), r[&3].finish),
        (1, Some(FinishReason::Abort))
    );
    assert_eq!(r[&4].tokens, expected_greedy(&prompt(20, 0, 4), 5, &[]));
}

#[test]
fn decodes_are_not_starved_by_a_long_prefill() {
    let mut harness = Harness::new(
        Setup {
            budget: 8,
            ..Setup::default()
        },
        vec![],
    );
    harness.add(request(1, prompt(4, 0, 1), greedy(40)));
    harness.step();
    harness.add(request(2, prompt(300, 0, 2), greedy(2)));
    harness.add(request(3, prompt(300, 0, 3), greedy(2)));
    harness.run_to_completion();
    let steps = &harness.received[&1].token_steps;
    // One token every step from the first to the last.
    assert_eq!(steps.len(), 40);
    assert!(steps.windows(2).all(|w| w[1] == w[0] + 1), "{steps:?}");
    // The long prompts did progress meanwhile, in arrival order.
    assert!(harness.received[&2].first_step < harness.received[&3].first_step);
    assert!(harness.received[&3].first_step > 0);
}

#[test]
fn admission_is_first_come_first_served() {
    let mut harness = Harness::new(
        Setup {
            max_seqs: 2,
            num_pages: 8,
            ..Setup::default()
        },
        vec![],
    );
    for id in 0..8 {
        let len = 10 + (id as usize * 29) % 70;
        harness.add(request(
            id,
            prompt(len, 0, id as u32),
            greedy(3 + id as usize % 4),
        ));
    }
    harness.run_to_completion();
    assert_eq!(harness.first_output_order, (0..8).collect::<Vec<_>>());
}

mod device_sampling;
mod hybrid_speculation;
mod logit_rules;
mod proptests;
mod speculative;
mod step_stats;
mod window_pool;
