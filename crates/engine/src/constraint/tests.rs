use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::request::{FinishReason, SamplingParams};
use crate::sampler::{argmax, Sampler};
use crate::testing::fake_backend::{logits_for_history, FakeBackend};
use crate::testing::fake_constraint::FakeGrammar;
use crate::testing::harness::{greedy, request, Harness, Setup};

fn mask_of(vocab: usize, allowed: &[u32]) -> TokenMask {
    let mut mask = TokenMask::new(vocab);
    for &t in allowed {
        mask.allow(t);
    }
    mask
}

proptest! {
    /// Whatever the sampling rules, a masked token is never sampled; greedy picks the best
    /// allowed token (ties: the lowest id).
    #[test]
    fn only_allowed_tokens_are_sampled(
        logits in prop::collection::vec(-10.0f32..10.0, 2..64),
        allowed_bits in prop::collection::vec(any::<bool>(), 64),
        temperature in prop_oneof![Just(0.0f32), 0.05f32..2.0],
        top_k in 0usize..8,
        top_p in 0.05f32..=1.0,
        min_p in 0.0f32..0.5,
        repetition_penalty in prop_oneof![Just(1.0f32), 0.5f32..2.0],
        presence_penalty in -2.0f32..2.0,
        seed in any::<u64>(),
    ) {
        let vocab = logits.len();
        let mut allowed: Vec<u32> = (0..vocab as u32).filter(|&t| allowed_bits[t as usize]).collect();
        if allowed.is_empty() {
            allowed.push(seed as u32 % vocab as u32);
        }
        let mask = mask_of(vocab, &allowed);
        let params = SamplingParams { temperature, top_k, top_p, min_p, repetition_penalty,
            presence_penalty, ..SamplingParams::default() };
        let history: Vec<u32> = (0..6).map(|i| (seed as u32).wrapping_add(i) % vocab as u32).collect();
        let mut sampler = Sampler::default();
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..4 {
            let token = sampler.sample_masked(&logits, &mask, &params, &history[..3], &history[3..], &mut rng);
            prop_assert!(mask.is_allowed(token), "sampled masked token {token}");
        }
        let plain_greedy = SamplingParams { temperature: 0.0, ..SamplingParams::default() };
        let token = sampler.sample_masked(&logits, &mask, &plain_greedy, &[], &[], &mut rng);
        let best = allowed.iter().copied().max_by(|&a, &b| {
            logits[a as usize].total_cmp(&logits[b as usize]).then(b.cmp(&a))
        }).unwrap();
        prop_assert_eq!(token, best);
    }
}

/// The greedy continuation of the fake model under `grammar`, computed without an engine.
fn constrained_greedy(prompt: &[u32], grammar: &FakeGrammar) -> Vec<u32> {
    let mut tokens = prompt.to_vec();
    let mut out = Vec::new();
    while out.len() < grammar.finish_after {
        let mut logits = logits_for_history(tokens.iter().copied());
        for (t, l) in logits.iter_mut().enumerate() {
            if !grammar.allows(out.len(), t as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        let next = argmax(&logits);
        out.push(next);
        tokens.push(next);
    }
    out
}

#[test]
fn a_constrained_request_follows_its_grammar_and_stops_when_it_is_finished() {
    let mut backend = FakeBackend::new(Setup::default().max_context);
    backend.samples_on_device = true;
    let sampling_log = backend.sampling_log.clone();
    let mut h = Harness::with_backend(Setup::default(), vec![], backend);
    let grammar = FakeGrammar::new(3, usize::MAX, 7);
    let prompt: Vec<u32> = (0..20).map(|i| (i * 7) % 32).collect();
    let constrained = crate::request::SamplingParams {
        constraint: Some(grammar.constraint()),
        ..greedy(50)
    };
    h.add(request(1, prompt.clone(), constrained.clone()));
    h.add(request(2, prompt.clone(), constrained));
    h.add(request(3, prompt.clone(), greedy(5)));
    h.run_to_completion();
    let expected = constrained_greedy(&prompt, &grammar);
    for id in [1, 2] {
        let got = &h.received[&id];
        assert_eq!(got.tokens, expected, "request {id}");
        assert_eq!(got.finish, Some(FinishReason::Stop));
    }
    // Each sequence ran its own constraint: both accepted the whole output.
    assert_eq!(grammar.accepted.lock().unwrap().len(), 2 * expected.len());
    // Every mask was computed off the scheduler thread (here: the test's), during the forward.
    let threads = grammar.mask_threads.lock().unwrap();
    assert_eq!(threads.len(), 2 * expected.len());
    assert!(!threads.contains(&std::thread::current().id()));
    // The unconstrained request went to the device; the constrained ones never did.
    let log = sampling_log.lock().unwrap();
    assert!(log.iter().any(|step| step.iter().flatten().count() > 0));
    assert!(log.iter().all(|step| step.iter().flatten().count() <= 1));
}

#[test]
fn end_tokens_come_only_where_the_constraint_may_end() {
    let eos = 5;
    let mut h = Harness::new(Setup::default(), vec![eos]);
    // Allows nothing but ending, from the start: the only token is the EOS.
    let grammar = FakeGrammar::new(0, 0, usize::MAX);
    h.add(request(
        1,
        vec![1, 2, 3],
        SamplingParams {
            constraint: Some(grammar.constraint()),
            ..greedy(10)
        },
    ));
    // The same with the EOS ignored: no token is allowed, so the request ends without one.
    h.add(request(
        2,
        vec![1, 2, 3],
        SamplingParams {
            constraint: Some(grammar.constraint()),
            ignore_eos: true,
            ..greedy(10)
        },
    ));
    h.run_to_completion();
    assert_eq!(h.received[&1].tokens, vec![eos]);
    assert_eq!(h.received[&1].finish, Some(FinishReason::Stop));
    assert!(h.received[&2].tokens.is_empty());
    assert_eq!(h.received[&2].finish, Some(FinishReason::Stop));
    assert!(
        grammar.accepted.lock().unwrap().is_empty(),
        "end tokens are not fed"
    );
}

struct Panicking;

impl ConstraintFactory for Panicking {
    fn start(&self) -> Box<dyn TokenConstraint> {
        Box::new(Panicking)
    }
}

impl TokenConstraint for Panicking {
    fn allowed(&mut self, _: &mut TokenMask) -> Result<(), ConstraintError> {
        panic!("a grammar engine bug")
    }
    fn accept(&mut self, _: u32) -> Result<(), ConstraintError> {
        Ok(())
    }
    fn is_finished(&self) -> bool {
        false
    }
    fn rollback(&mut self, _: usize) -> Result<(), ConstraintError> {
        Ok(())
    }
}

#[test]
fn a_panicking_constraint_ends_its_request_without_an_unconstrained_token() {
    let mut h = Harness::new(Setup::default(), vec![]);
    h.add(request(
        1,
        vec![1, 2, 3],
        SamplingParams {
            constraint: Some(Constraint::new(Panicking)),
            ..greedy(10)
        },
    ));
    h.add(request(2, vec![1, 2, 3], greedy(4)));
    h.run_to_completion();
    assert!(h.received[&1].tokens.is_empty());
    assert_eq!(h.received[&1].finish, Some(FinishReason::Stop));
    assert_eq!(h.received[&2].tokens.len(), 4);
}
