//! The engine/backend sampling contract: which sequences the engine lets a backend sample on
//! its device, and that device-sampled tokens flow through finish logic like host ones.

use crate::backend::DeviceSampling;
use crate::request::{FinishReason, SamplingParams};
use crate::testing::fake_backend::{device_pick, expected_greedy, FakeBackend};
use crate::testing::fake_constraint::FakeGrammar;
use crate::testing::harness::{greedy, request, Harness, Setup};

fn device_harness() -> Harness {
    let setup = Setup::default();
    let mut backend = FakeBackend::new(setup.max_context);
    backend.samples_on_device = true;
    Harness::with_backend(setup, vec![], backend)
}

fn prompt(len: usize, salt: u32) -> Vec<u32> {
    (0..len as u32).map(|i| (i * 11 + salt * 3) % 32).collect()
}

fn seeded(seed: u64, max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.8,
        top_k: 5,
        top_p: 0.9,
        min_p: 0.05,
        seed: Some(seed),
        max_tokens,
        ..SamplingParams::default()
    }
}

/// What the fake device draws for a seeded request: one pick per generated token.
fn expected_seeded(params: &SamplingParams) -> Vec<u32> {
    (0..params.max_tokens as u64)
        .map(|counter| {
            let p = DeviceSampling {
                temperature: params.temperature,
                top_k: params.top_k as u32,
                top_p: params.top_p,
                min_p: params.min_p,
                seed: params.seed.unwrap(),
                counter,
                mask: None,
            };
            device_pick(&[0.0; crate::testing::fake_backend::VOCAB], &p)
        })
        .collect()
}

#[test]
fn greedy_tokens_sampled_on_the_device_match_the_oracle() {
    let mut h = device_harness();
    for id in 0..6u64 {
        h.add(request(
            id,
            prompt(10 + 9 * id as usize, id as u32),
            greedy(9),
        ));
    }
    h.run_to_completion();
    for id in 0..6u64 {
        let p = prompt(10 + 9 * id as usize, id as u32);
        assert_eq!(
            h.received[&id].tokens,
            expected_greedy(&p, 9, &[]),
            "id {id}"
        );
        assert_eq!(h.received[&id].finish, Some(FinishReason::Length));
    }
    let log = h.log.lock().unwrap().len();
    assert!(log > 0);
}

#[test]
fn seeded_device_draws_follow_seed_and_counter_whatever_shares_the_step() {
    let params = seeded(77, 8);
    let alone = {
        let mut h = device_harness();
        h.add(request(1, prompt(20, 1), params.clone()));
        h.run_to_completion();
        h.received[&1].tokens.clone()
    };
    let crowded = {
        let mut h = device_harness();
        for id in 2..7u64 {
            h.add(request(id, prompt(30, id as u32), seeded(id, 5)));
        }
        h.add(request(1, prompt(20, 1), params.clone()));
        h.run_to_completion();
        h.received[&1].tokens.clone()
    };
    assert_eq!(alone, expected_seeded(&params));
    assert_eq!(crowded, alone);
}

#[test]
fn penalties_and_logprobs_stay_on_the_host() {
    let mut backend = FakeBackend::new(4096);
    backend.samples_on_device = true;
    let sampling_log = backend.sampling_log.clone();
    let mut h = Harness::with_backend(Setup::default(), vec![], backend);
    let with_logprobs = SamplingParams {
        logprobs: Some(2),
        ..greedy(4)
    };
    let with_penalty = SamplingParams {
        presence_penalty: 0.5,
        ..greedy(4)
    };
    let plain = greedy(4);
    h.add(request(1, prompt(12, 1), with_logprobs));
    h.add(request(2, prompt(12, 2), with_penalty));
    h.add(request(3, prompt(12, 3), plain));
    h.run_to_completion();

    // Every step ran all three together (same lengths): only the plain one was delegated.
    let log = sampling_log.lock().unwrap();
    assert!(!log.is_empty());
    for step in log.iter() {
        assert_eq!(step.len(), 3);
        assert!(step[0].is_none() && step[1].is_none(), "{step:?}");
        let delegated = step[2].as_ref().expect("plain greedy request is delegated");
        assert_eq!(delegated.temperature, 0.0);
    }
    // The counter is the number of tokens generated before the draw.
    let counters: Vec<u64> = log.iter().map(|s| s[2].as_ref().unwrap().counter).collect();
    assert_eq!(counters, vec![0, 1, 2, 3]);
    drop(log);
    assert_eq!(h.received[&1].logprobs.len(), 4);
    assert_eq!(
        h.received[&3].tokens,
        expected_greedy(&prompt(12, 3), 4, &[])
    );
}

#[test]
fn a_request_with_the_infill_sampler_stays_on_the_host() {
    use std::sync::Arc;

    use crate::testing::fake_backend::VOCAB;
    use crate::token_pieces::{InfillSampling, TokenPieces};
    let mut backend = FakeBackend::new(4096);
    backend.samples_on_device = true;
    let sampling_log = backend.sampling_log.clone();
    let mut h = Harness::with_backend(Setup::default(), vec![], backend);
    let pieces = (0..VOCAB).map(|t| vec![b'a' + (t % 26) as u8]).collect();
    let infill = SamplingParams {
        infill: Some(InfillSampling(Arc::new(TokenPieces::new(pieces)))),
        ..seeded(7, 4)
    };
    h.add(request(1, prompt(12, 1), infill));
    h.add(request(2, prompt(12, 2), seeded(8, 4)));
    h.run_to_completion();
    let log = sampling_log.lock().unwrap();
    assert!(!log.is_empty());
    for step in log.iter() {
        assert!(step[0].is_none() && step[1].is_some(), "{step:?}");
    }
    drop(log);
    assert_eq!(h.received[&1].tokens.len(), 4);
}

#[test]
fn a_backend_without_device_sampling_is_never_asked() {
    let backend = FakeBackend::new(4096);
    let sampling_log = backend.sampling_log.clone();
    let mut h = Harness::with_backend(Setup::default(), vec![], backend);
    h.add(request(1, prompt(12, 1), greedy(3)));
    h.run_to_completion();
    assert!(sampling_log.lock().unwrap().is_empty());
    assert_eq!(
        h.received[&1].tokens,
        expected_greedy(&prompt(12, 1), 3, &[])
    );
}

#[test]
fn eos_sampled_on_the_device_stops_the_request() {
    let p = prompt(15, 4);
    let free = expected_greedy(&p, 6, &[]);
    let eos = free[2];
    let setup = Setup::default();
    let mut backend = FakeBackend::new(setup.max_context);
    backend.samples_on_device = true;
    let mut h = Harness::with_backend(setup, vec![eos], backend);
    h.add(request(1, p.clone(), greedy(6)));
    h.run_to_completion();
    assert_eq!(h.received[&1].tokens, expected_greedy(&p, 6, &[eos]));
    assert_eq!(h.received[&1].finish, Some(FinishReason::Stop));
}

fn masking_harness(
    ignores_masks: bool,
) -> (
    Harness,
    std::sync::Arc<std::sync::Mutex<Vec<Vec<Option<DeviceSampling>>>>>,
) {
    let mut backend = FakeBackend::new(4096);
    backend.samples_on_device = true;
    backend.samples_masked = true;
    backend.ignores_masks = ignores_masks;
    let log = backend.sampling_log.clone();
    (
        Harness::with_backend(Setup::default(), vec![], backend),
        log,
    )
}

#[test]
fn constrained_sequences_are_sampled_on_a_masking_device_within_the_grammar() {
    let (mut h, log) = masking_harness(false);
    let grammar = FakeGrammar::new(3, 100, 6);
    for (id, params) in [(1, greedy(20)), (2, seeded(9, 20))] {
        let params = SamplingParams {
            constraint: Some(grammar.constraint()),
            ..params
        };
        h.add(request(id, prompt(12, id as u32), params));
    }
    h.run_to_completion();
    for id in [1, 2] {
        let got = &h.received[&id];
        assert_eq!(got.tokens.len(), 6, "id {id}: finished by the grammar");
        assert_eq!(got.finish, Some(FinishReason::Stop));
        for (i, &t) in got.tokens.iter().enumerate() {
            assert!(
                grammar.allows(i, t),
                "id {id}: token {t} at {i} is outside the grammar"
            );
        }
    }
    let log = log.lock().unwrap();
    assert!(
        log.iter().flatten().flatten().any(|s| s.mask.is_some()),
        "constrained requests went to the device with their masks"
    );
}

#[test]
fn a_device_that_ignores_the_mask_cannot_emit_a_forbidden_token() {
    let (mut h, _) = masking_harness(true);
    let grammar = FakeGrammar::new(7, 100, 12);
    for id in 1..=4u64 {
        let params = SamplingParams {
            constraint: Some(grammar.constraint()),
            ..seeded(id, 12)
        };
        h.add(request(id, prompt(12, id as u32), params));
    }
    h.run_to_completion();
    let mut cut_short = 0;
    for id in 1..=4u64 {
        let got = &h.received[&id];
        for (i, &t) in got.tokens.iter().enumerate() {
            assert!(
                grammar.allows(i, t),
                "id {id}: token {t} at {i} is outside the grammar"
            );
        }
        cut_short += usize::from(got.tokens.len() < 12);
        assert_eq!(got.finish, Some(FinishReason::Stop));
    }
    assert!(
        cut_short > 0,
        "unmasked draws (1 in 7 allowed) must have been caught"
    );
}
