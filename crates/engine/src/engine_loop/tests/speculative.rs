//! Speculative decoding through the whole engine, on the fake model (whose logits come from
//! the token history it reads back from its KV pages, so a wrong rollback or a stale page
//! changes its answers): greedy output is exactly plain greedy output, for every proposer,
//! alone and batched, with page sizes 1 and 16, under KV pressure, with an EOS inside the
//! accepted drafts; and the page accounting holds after every step (the harness checks it).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::request::SamplingParams;
use crate::speculative::{DraftModel, NgramProposer, Proposer, Speculation, SuffixProposer};
use crate::testing::fake_backend::{expected_greedy, FakeBackend, VOCAB};
use crate::testing::fake_constraint::FakeGrammar;
use crate::testing::harness::{greedy, request, Harness, Setup};

fn draft_model(salt: u64) -> Box<dyn Proposer> {
    let mut backend = FakeBackend::new(4096);
    backend.salt = salt;
    Box::new(DraftModel::new(Box::new(backend)).unwrap())
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Method {
    Ngram,
    /// Suffix decoding (tries over the request and over finished requests' outputs).
    Suffix,
    /// A draft model identical to the target (everything accepted).
    PerfectDraft,
    /// A draft model that agrees with the target on about half of all histories.
    Draft,
}

pub(super) fn proposer(method: Method) -> Box<dyn Proposer> {
    match method {
        Method::Ngram => Box::new(NgramProposer::default()),
        Method::Suffix => Box::new(SuffixProposer::new(Default::default())),
        Method::PerfectDraft => draft_model(0),
        Method::Draft => draft_model(7),
    }
}

pub(super) fn harness(setup: Setup, eos: Vec<u32>, method: Method, k: usize) -> Harness {
    let mut h = Harness::new(setup, eos);
    let mut speculation = Speculation::new(proposer(method), k, false);
    speculation
        .init_kv_cache(setup.num_pages, setup.page_size)
        .unwrap();
    h.core.set_speculation(speculation);
    h
}

pub(super) fn prompts(n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let len = rng.random_range(3..40);
            let mut p: Vec<u32> = (0..len)
                .map(|_| rng.random_range(0..VOCAB as u32))
                .collect();
            if i % 2 == 0 {
                // Something for prompt lookup to find.
                let copy = p[..len / 2].to_vec();
                p.extend(copy);
            }
            p
        })
        .collect()
}

fn check_greedy(setup: Setup, method: Method, k: usize, batched: bool, eos: Vec<u32>) {
    let prompts = prompts(8, 42);
    let max_tokens = 30;
    let run = |subset: &[(usize, &Vec<u32>)]| {
        let mut h = harness(setup, eos.clone(), method, k);
        for (i, p) in subset {
            h.add(request(*i as u64, p.to_vec(), greedy(max_tokens)));
        }
        h.run_to_completion();
        h
    };
    let all: Vec<(usize, &Vec<u32>)> = prompts.iter().enumerate().collect();
    let groups: Vec<Vec<(usize, &Vec<u32>)>> = if batched {
        vec![all]
    } else {
        all.into_iter().map(|x| vec![x]).collect()
    };
    let mut drafted = 0;
    for group in groups {
        let h = run(&group);
        for (i, p) in group {
            let want = expected_greedy(p, max_tokens, &eos);
            let got = &h.received[&(i as u64)].tokens;
            assert_eq!(
                got, &want,
                "{method:?} k={k} batched={batched} page={} request {i}",
                setup.page_size
            );
        }
        let counters = &h.core.speculation().unwrap().counters;
        drafted += counters.num_draft_tokens;
        if let Method::PerfectDraft = method {
            assert_eq!(counters.num_accepted_tokens, counters.num_draft_tokens);
        }
    }
    assert!(drafted > 0, "{method:?}: nothing was drafted");
}

#[test]
fn greedy_output_is_plain_greedy_for_every_proposer_alone_and_batched() {
    for method in [
        Method::Ngram,
        Method::Suffix,
        Method::PerfectDraft,
        Method::Draft,
    ] {
        for page_size in [1, 16] {
            for (k, batched) in [(1, true), (3, false), (5, true)] {
                let setup = Setup {
                    page_size,
                    num_pages: 4096 / page_size,
                    ..Setup::default()
                };
                check_greedy(setup, method, k, batched, vec![]);
            }
        }
    }
}

#[test]
fn greedy_output_survives_kv_pressure_and_eos_inside_drafts() {
    // Few pages: drafts get less room and sequences are preempted and recomputed.
    let tight = Setup {
        num_pages: 24,
        page_size: 4,
        budget: 64,
        ..Setup::default()
    };
    for method in [
        Method::Ngram,
        Method::Suffix,
        Method::Draft,
        Method::PerfectDraft,
    ] {
        check_greedy(tight, method, 4, true, vec![]);
        // Tokens 3 and 17 end generations, often in the middle of an accepted run.
        check_greedy(Setup::default(), method, 4, true, vec![3, 17]);
    }
}

#[test]
fn logprobs_and_prefix_sharing_match_plain_decoding() {
    let params = SamplingParams {
        logprobs: Some(2),
        ..greedy(20)
    };
    let shared: Vec<u32> = (0..40).map(|i| (i * 7 % VOCAB) as u32).collect();
    let run = |speculate: bool| {
        let mut h = if speculate {
            harness(Setup::default(), vec![], Method::Draft, 3)
        } else {
            Harness::new(Setup::default(), vec![])
        };
        for i in 0..4u32 {
            let mut prompt = shared.clone();
            prompt.push(i);
            h.add(request(i as u64, prompt, params.clone()));
            h.step();
        }
        h.run_to_completion();
        h
    };
    let (plain, spec) = (run(false), run(true));
    for i in 0..4u64 {
        let (a, b) = (&plain.received[&i], &spec.received[&i]);
        assert_eq!(a.tokens, b.tokens);
        assert_eq!(a.logprobs, b.logprobs);
        assert_eq!(a.num_cached_tokens, b.num_cached_tokens);
    }
}

#[test]
fn sampled_requests_with_a_perfect_draft_accept_everything() {
    let mut h = harness(Setup::default(), vec![], Method::PerfectDraft, 4);
    for i in 0..4u64 {
        let params = SamplingParams {
            temperature: 0.9,
            top_p: 0.95,
            seed: Some(i),
            max_tokens: 25,
            ..SamplingParams::default()
        };
        h.add(request(i, prompts(4, i)[0].clone(), params));
    }
    h.run_to_completion();
    for i in 0..4u64 {
        let r = &h.received[&i];
        assert_eq!(r.tokens.len(), 25);
        assert!(r.tokens.iter().all(|&t| (t as usize) < VOCAB));
    }
    let c = &h.core.speculation().unwrap().counters;
    assert!(c.num_draft_tokens > 0);
    // p = q everywhere: every draft is accepted.
    assert_eq!(c.num_accepted_tokens, c.num_draft_tokens);
}

#[test]
fn a_predicted_output_drafts_for_its_request_and_changes_nothing_else() {
    // Under n-gram speculation (which finds nothing in these random prompts), a request with
    // its own greedy answer as the prediction has every draft accepted; one with a wrong
    // prediction gets plain greedy output anyway; its neighbour is untouched.
    let prompt = prompts(3, 5);
    let answer = expected_greedy(&prompt[0], 24, &[]);
    let mut wrong = answer.clone();
    wrong[10] = (wrong[10] + 1) % VOCAB as u32;
    wrong.insert(15, 3);
    let mut h = harness(Setup::default(), vec![], Method::Ngram, 4);
    for (id, prediction) in [(0u64, Some(answer.clone())), (1, Some(wrong)), (2, None)] {
        let params = SamplingParams {
            prediction: prediction.map(Into::into),
            ..greedy(24)
        };
        let p = if id == 2 { &prompt[2] } else { &prompt[0] };
        h.add(request(id, p.clone(), params));
    }
    h.run_to_completion();
    assert_eq!(h.received[&0].tokens, answer);
    assert_eq!(h.received[&1].tokens, answer);
    assert_eq!(h.received[&2].tokens, expected_greedy(&prompt[2], 24, &[]));
    let c = &h.core.speculation().unwrap().counters;
    assert!(c.num_accepted_tokens >= 20, "{c:?}");
    assert!(
        c.num_accepted_tokens < c.num_draft_tokens,
        "the wrong one has rejections"
    );
}

#[test]
fn requests_that_opt_out_are_never_drafted_for() {
    let mut h = harness(Setup::default(), vec![], Method::PerfectDraft, 4);
    let params = SamplingParams {
        allow_speculation: false,
        ..greedy(20)
    };
    let prompt = prompts(1, 3)[0].clone();
    h.add(request(1, prompt.clone(), params));
    h.run_to_completion();
    assert_eq!(h.received[&1].tokens, expected_greedy(&prompt, 20, &[]));
    assert_eq!(h.core.speculation().unwrap().counters.num_drafts, 0);
}

#[test]
fn no_drafts_while_more_sequences_decode_than_the_batch_limit() {
    let run = |limit: Option<usize>| {
        let setup = Setup::default();
        let mut h = Harness::new(setup, vec![]);
        let mut speculation = Speculation::new(proposer(Method::PerfectDraft), 4, false);
        speculation.disable_by_batch_size = limit;
        speculation
            .init_kv_cache(setup.num_pages, setup.page_size)
            .unwrap();
        h.core.set_speculation(speculation);
        let prompts = prompts(3, 9);
        // Different lengths, so that the batch shrinks from three to one.
        for (i, prompt) in prompts.iter().enumerate() {
            h.add(request(i as u64, prompt.clone(), greedy(8 + 12 * i)));
        }
        h.run_to_completion();
        for (i, prompt) in prompts.iter().enumerate() {
            assert_eq!(
                h.received[&(i as u64)].tokens,
                expected_greedy(prompt, 8 + 12 * i, &[])
            );
        }
        h.core.speculation().unwrap().counters.num_drafts
    };
    let unlimited = run(None);
    let limited = run(Some(1));
    // With the limit only the last sequence, alone, speculates.
    assert!(limited > 0, "the lone last sequence should speculate");
    assert!(
        limited < unlimited,
        "limited {limited} vs unlimited {unlimited}"
    );
    assert_eq!(run(Some(0)), 0);
}

/// Constrained requests are drafted for: the grammar masks the target's rows as the drafts
/// are verified (a draft it forbids is rejected) and takes exactly the kept ones, so greedy
/// output with drafts is the constrained greedy output without them, token for token and in
/// where it ends (the grammar's completion or an end token it allows), for every proposer;
/// seeded sampled requests stay inside the grammar.
#[test]
fn constrained_output_with_drafts_is_constrained_output_without() {
    let setup = Setup::default();
    let prompts = prompts(6, 77);
    // Half the vocabulary allowed at each position, may end after 6 tokens, complete at 14.
    let grammar = FakeGrammar::new(2, 6, 14);
    let eos = vec![3];
    let constrained = |params: SamplingParams| SamplingParams {
        constraint: Some(grammar.constraint()),
        ..params
    };
    let run = |speculation: Option<Method>, params: &dyn Fn(u64) -> SamplingParams| {
        let mut h = match speculation {
            Some(method) => harness(setup, eos.clone(), method, 4),
            None => Harness::new(setup, eos.clone()),
        };
        for (i, p) in prompts.iter().enumerate() {
            h.add(request(i as u64, p.clone(), constrained(params(i as u64))));
        }
        h.run_to_completion();
        h
    };
    let plain = run(None, &|_| greedy(30));
    for method in [
        Method::Ngram,
        Method::Suffix,
        Method::PerfectDraft,
        Method::Draft,
    ] {
        let spec = run(Some(method), &|_| greedy(30));
        for i in 0..prompts.len() as u64 {
            let (a, b) = (&plain.received[&i], &spec.received[&i]);
            assert_eq!(a.tokens, b.tokens, "{method:?} request {i}");
            assert_eq!(a.finish, b.finish, "{method:?} request {i}");
        }
        // Prompt lookup and suffix tries find little to copy in these short constrained
        // outputs; the draft models always propose.
        let c = &spec.core.speculation().unwrap().counters;
        if !matches!(method, Method::Ngram | Method::Suffix) {
            assert!(
                c.num_draft_tokens > 0,
                "{method:?}: constrained requests drafted for"
            );
            assert!(c.num_accepted_tokens > 0, "{method:?}: some drafts kept");
            assert!(
                c.num_accepted_tokens < c.num_draft_tokens,
                "{method:?}: drafts the grammar forbids are rejected"
            );
        }
    }
    let sampled = |i: u64| SamplingParams {
        temperature: 0.9,
        seed: Some(i),
        ..greedy(30)
    };
    let spec = run(Some(Method::Draft), &sampled);
    for i in 0..prompts.len() as u64 {
        let tokens = &spec.received[&i].tokens;
        for (pos, &t) in tokens.iter().enumerate() {
            let ends = eos.contains(&t) && pos >= 6;
            assert!(grammar.allows(pos, t) || ends, "request {i}: {t} at {pos}");
        }
    }
}

#[test]
fn suffix_drafts_cut_to_what_pays_keep_greedy_output() {
    // Adaptive: the step keeps as many scored drafts as its measured costs say pay (the cut
    // depends on wall-clock timings, the output must not).
    let prompts = prompts(8, 11);
    let mut h = Harness::new(Setup::default(), vec![]);
    h.core
        .set_speculation(Speculation::new(proposer(Method::Suffix), 8, true));
    for (i, p) in prompts.iter().enumerate() {
        h.add(request(i as u64, p.clone(), greedy(40)));
    }
    h.run_to_completion();
    for (i, p) in prompts.iter().enumerate() {
        let want = expected_greedy(p, 40, &[]);
        assert_eq!(h.received[&(i as u64)].tokens, want, "request {i}");
    }
}
