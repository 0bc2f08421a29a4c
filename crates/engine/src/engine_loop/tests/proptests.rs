//! Random schedules of arrivals, steps and aborts over small pools (so preemption and
//! eviction happen), page sizes 1 and 16, prefix caching on and off, with and without a
//! sliding-window pool (as small as one sequence's window and step allow), with and without
//! recurrent state (snapshots at random intervals), with and without speculative decoding (any
//! proposer), first-come-first-served or by random priorities. The harness checks the page accounting after every step, and the fake model
//! checks every state it continues from; here we check nothing is lost or leaked at the end and
//! that every request that ran to its end got exactly what the model oracle says.

use proptest::prelude::*;

use super::speculative::{proposer, Method};
use crate::config::SchedulingPolicy;
use crate::request::{FinishReason, RequestId, SamplingParams};
use crate::speculative::Speculation;
use crate::testing::fake_backend::expected_greedy;
use crate::testing::harness::{greedy, request, Harness, Setup};

#[derive(Debug, Clone)]
enum Op {
    /// A request whose prompt takes `shared` tokens from one of three common prefixes.
    Add {
        prefix: u32,
        shared: usize,
        own: usize,
        max_tokens: usize,
        seed: Option<u64>,
        prompt_logprobs: bool,
        /// Used where the setup schedules by priority.
        priority: i32,
    },
    Steps(usize),
    /// Abort the n-th request added so far (modulo), wherever it is.
    Abort(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..3, 0usize..40, 1usize..20, 1usize..20, prop::option::of(0u64..4), 0..4, -2i32..3)
            .prop_map(|(prefix, shared, own, max_tokens, seed, one_in_4, priority)| Op::Add {
                prefix, shared, own, max_tokens, seed, prompt_logprobs: one_in_4 == 0, priority
            }),
        3 => (1usize..6).prop_map(Op::Steps),
        1 => (0usize..64).prop_map(Op::Abort),
    ]
}

fn prompt(prefix: u32, shared: usize, own: usize, salt: u32) -> Vec<u32> {
    let common = (0..shared as u32).map(move |i| (i * 11 + prefix * 7) % 32);
    common
        .chain((0..own as u32).map(move |i| (i * 5 + salt * 3 + 1) % 32))
        .collect()
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![Just(1usize), Just(16)],
        3usize..12,
        1usize..40,
        1usize..6,
        any::<bool>(),
        prop::option::of((1usize..40, 0usize..6)),
        prop::option::of((0usize..4, prop_oneof![Just(1usize), Just(16), Just(32)])),
        prop_oneof![
            Just(SchedulingPolicy::Fcfs),
            Just(SchedulingPolicy::Priority)
        ],
    )
        .prop_map(
            |(page_size, pages16, budget, max_seqs, prefix_caching, window, recurrent, policy)| {
                Setup {
                    page_size,
                    // The same capacity in tokens whatever the page size: 48..192 tokens.
                    num_pages: pages16 * 16 / page_size,
                    budget,
                    max_seqs,
                    prefix_caching,
                    max_context: 4096,
                    // The least a sequence can run in: its window and a page either side, and
                    // a step's tokens; then a few to spare (the prefix cache keeps those).
                    window: window.map(|(tokens, spare)| {
                        let least =
                            (tokens - 1).div_ceil(page_size) + 2 + budget.div_ceil(page_size);
                        (tokens, least + spare)
                    }),
                    recurrent,
                    policy,
                }
            },
        )
}

fn speculation() -> impl Strategy<Value = Option<(Method, usize)>> {
    let method = prop_oneof![
        Just(Method::Ngram),
        Just(Method::Suffix),
        Just(Method::PerfectDraft),
        Just(Method::Draft),
    ];
    prop::option::of((method, 1usize..5))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_lose_no_request_and_leak_no_page(
        setup in setup(),
        speculating in speculation(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let eos = vec![31];
        let mut harness = Harness::new(setup, eos.clone());
        if let Some((method, k)) = speculating {
            let mut speculation = Speculation::new(proposer(method), k, false);
            speculation.init_kv_cache(setup.num_pages, setup.page_size).unwrap();
            harness.core.set_speculation(speculation);
        }
        let mut added: Vec<(RequestId, Vec<u32>, SamplingParams)> = Vec::new();
        let mut aborted = Vec::new();
        for op in ops {
            match op {
                Op::Add { prefix, shared, own, max_tokens, seed, prompt_logprobs, priority } => {
                    let id = added.len() as RequestId;
                    let text = prompt(prefix, shared, own, id as u32);
                    let mut params = match seed {
                        None => greedy(max_tokens),
                        Some(seed) => SamplingParams {
                            temperature: 1.0, seed: Some(seed), max_tokens,
                            ..SamplingParams::default()
                        },
                    };
                    params.prompt_logprobs = prompt_logprobs.then_some(1);
                    params.priority = priority;
                    harness.add(request(id, text.clone(), params.clone()));
                    added.push((id, text, params));
                }
                Op::Steps(n) => (0..n).for_each(|_| harness.step()),
                Op::Abort(n) if !added.is_empty() => {
                    let id = added[n % added.len()].0;
                    harness.core.abort(id);
                    aborted.push(id);
                }
                Op::Abort(_) => {}
            }
        }
        harness.run_to_completion();
        // A failing proposer turns speculation off (and the output stays right): not here.
        prop_assert_eq!(harness.core.speculation().is_some(), speculating.is_some());

        let kv = harness.core.scheduler().kv();
        prop_assert_eq!(kv.num_referenced(), 0, "pages still referenced at the end");
        prop_assert_eq!(harness.received.len(), added.len(), "a request was lost");
        let capacity = setup.num_pages * setup.page_size;
        for (id, text, params) in &added {
            let got = &harness.received[id];
            prop_assert!(got.finish.is_some(), "request {} never finished", id);
            if got.finish == Some(FinishReason::Abort) {
                prop_assert!(aborted.contains(id), "request {} aborted by the engine", id);
                continue;
            }
            if text.len() >= capacity {
                prop_assert_eq!(got.finish, Some(FinishReason::Length));
                continue;
            }
            if params.prompt_logprobs.is_some() {
                let entries = got.prompt_logprobs.as_ref();
                let tokens: Option<Vec<Option<u32>>> =
                    entries.map(|e| e.iter().map(|lp| lp.as_ref().map(|lp| lp.token)).collect());
                let expected: Vec<Option<u32>> =
                    text.iter().enumerate().map(|(i, &t)| (i > 0).then_some(t)).collect();
                prop_assert_eq!(tokens, Some(expected), "prompt logprobs of {}", id);
            }
            if params.temperature == 0.0 {
                let room = params.max_tokens.min(capacity - text.len());
                prop_assert_eq!(&got.tokens, &expected_greedy(text, room, &eos), "request {}", id);
            }
        }
    }
}
