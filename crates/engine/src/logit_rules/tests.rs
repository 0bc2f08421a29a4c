use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::request::SamplingParams;
use crate::sampler::{argmax, Sampler};

const EOS: u32 = 2;

fn ruled(temperature: f32, rules: LogitRules) -> SamplingParams {
    SamplingParams {
        temperature,
        logit_rules: rules,
        ..SamplingParams::default()
    }
}

fn greedy_pick(logits: &[f32], params: &SamplingParams, output: &[u32]) -> u32 {
    let mut rng = StdRng::seed_from_u64(0);
    Sampler::new(&[EOS]).sample(logits, params, &[], output, &mut rng)
}

#[test]
fn a_bias_changes_the_greedy_token() {
    let logits = [1.0, 2.0, 3.0, 0.5];
    assert_eq!(
        greedy_pick(&logits, &ruled(0.0, LogitRules::default()), &[]),
        2
    );
    let up = LogitRules {
        logit_bias: vec![(3, 100.0)],
        ..LogitRules::default()
    };
    assert_eq!(greedy_pick(&logits, &ruled(0.0, up), &[]), 3);
    let down = LogitRules {
        logit_bias: vec![(2, -100.0)],
        ..LogitRules::default()
    };
    assert_eq!(greedy_pick(&logits, &ruled(0.0, down), &[]), 1);
}

#[test]
fn a_bias_of_plus_100_makes_sampling_pick_the_token() {
    let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32).collect();
    let params = ruled(
        1.0,
        LogitRules {
            logit_bias: vec![(11, 100.0)],
            ..LogitRules::default()
        },
    );
    let mut sampler = Sampler::new(&[EOS]);
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..200 {
        assert_eq!(sampler.sample(&logits, &params, &[], &[], &mut rng), 11);
    }
}

#[test]
fn min_tokens_holds_eos_and_stop_ids_back_until_enough_output() {
    // EOS is the best token, stop id 4 the second, token 1 the third.
    let logits = [0.0, 5.0, 9.0, 0.0, 7.0];
    let params = SamplingParams {
        stop_token_ids: vec![4],
        ..ruled(
            0.0,
            LogitRules {
                min_tokens: 3,
                ..LogitRules::default()
            },
        )
    };
    assert_eq!(greedy_pick(&logits, &params, &[]), 1);
    assert_eq!(greedy_pick(&logits, &params, &[1, 1]), 1);
    assert_eq!(greedy_pick(&logits, &params, &[1, 1, 1]), EOS);
    // EOS ignored is no end token: only the stop id is held back.
    let ignoring = SamplingParams {
        ignore_eos: true,
        ..params.clone()
    };
    assert_eq!(greedy_pick(&logits, &ignoring, &[]), EOS);
    let eos_best_gone = [0.0, 5.0, -1.0, 0.0, 7.0];
    assert_eq!(greedy_pick(&eos_best_gone, &ignoring, &[]), 1);
}

#[test]
fn only_allowed_ids_are_sampled_and_greedy_takes_the_best_of_them() {
    let logits: Vec<f32> = (0..64).map(|i| ((i * 37) % 64) as f32 / 8.0).collect();
    let allowed = vec![5, 17, 40];
    let rules = LogitRules {
        allowed_token_ids: Some(allowed.clone()),
        ..LogitRules::default()
    };
    let best = *allowed
        .iter()
        .max_by(|&&a, &&b| logits[a as usize].total_cmp(&logits[b as usize]))
        .unwrap();
    assert_eq!(greedy_pick(&logits, &ruled(0.0, rules.clone()), &[]), best);
    let params = ruled(1.5, rules);
    let mut sampler = Sampler::new(&[EOS]);
    let mut rng = StdRng::seed_from_u64(9);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..500 {
        let token = sampler.sample(&logits, &params, &[], &[], &mut rng);
        assert!(allowed.contains(&token), "{token}");
        seen.insert(token);
    }
    assert_eq!(seen.len(), allowed.len(), "every allowed id is drawn");
    // The distribution speculative verification uses holds the same support.
    let support = sampler.support(&logits, &params, &[], &[]);
    let mut tokens: Vec<u32> = support.iter().map(|c| c.token).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, allowed);
}

#[test]
fn a_bad_word_is_masked_only_where_the_output_would_complete_it() {
    // Token 6 is the best everywhere.
    let logits = [0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 9.0];
    let rules = LogitRules {
        bad_words: vec![vec![3, 4, 6], vec![5]],
        ..LogitRules::default()
    };
    let params = ruled(0.0, rules);
    assert_eq!(greedy_pick(&logits, &params, &[]), 6);
    assert_eq!(greedy_pick(&logits, &params, &[3]), 6);
    assert_eq!(
        greedy_pick(&logits, &params, &[1, 3, 4]),
        1,
        "6 and 5 are banned"
    );
    // The prompt is no part of the output: a bad word's prefix there does not count.
    let mut rng = StdRng::seed_from_u64(0);
    let got = Sampler::new(&[EOS]).sample(&logits, &params, &[3, 4], &[], &mut rng);
    assert_eq!(got, 6);
}

#[test]
fn rules_that_leave_no_token_yield_to_the_allowed_ids() {
    // Only EOS is allowed while min_tokens holds it back: EOS comes out, not a token outside
    // the allowed ids.
    let logits = [3.0, 1.0, 0.0, 2.0];
    let params = ruled(
        0.0,
        LogitRules {
            allowed_token_ids: Some(vec![EOS]),
            min_tokens: 4,
            bad_words: vec![vec![EOS]],
            ..LogitRules::default()
        },
    );
    assert_eq!(greedy_pick(&logits, &params, &[]), EOS);
    let mut row = logits.to_vec();
    params.logit_rules.apply(&mut row, &[], &[EOS]);
    assert_eq!(argmax(&row), EOS);
    assert!(row
        .iter()
        .enumerate()
        .all(|(t, &l)| (t as u32 == EOS) == l.is_finite()));
}

#[test]
fn ids_past_the_vocabulary_change_nothing() {
    let logits = [1.0, 2.0];
    let mut row = logits.to_vec();
    LogitRules {
        logit_bias: vec![(9, 50.0)],
        bad_words: vec![vec![7]],
        min_tokens: 3,
        ..LogitRules::default()
    }
    .apply(&mut row, &[], &[8]);
    assert_eq!(row, logits);
}

#[test]
fn a_spent_thinking_budget_forces_the_end_of_thinking_once() {
    let rules = LogitRules {
        thinking_budget: Some(ThinkingBudget { tokens: 3, end: 5 }),
        logit_bias: vec![(5, -100.0)],
        ..LogitRules::default()
    };
    assert!(!rules.is_empty());
    assert!(rules.token_ids().any(|t| t == 5));
    let logits = [0.5f32, 3.0, 1.0, 0.0, 2.0, -1.0, 0.25];
    let ruled = |output: &[u32]| {
        let mut row = logits.to_vec();
        rules.apply(&mut row, output, &[]);
        row
    };
    // Within the budget, only the bias applies.
    assert_eq!(ruled(&[1, 2])[1], 3.0);
    // Spent: the end token alone, whatever its logit (here biased away).
    let spent = ruled(&[1, 2, 4]);
    let best = spent
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0;
    assert_eq!(best, 5);
    assert_eq!(spent.iter().filter(|l| l.is_finite()).count(), 1);
    // Once the reasoning has ended, the answer runs free.
    assert_eq!(ruled(&[1, 2, 4, 5, 1])[1], 3.0);
    assert_eq!(ruled(&[5, 1, 2, 4])[1], 3.0);
}

proptest! {
    /// Whatever the output and the bad words, the sampled token never completes one (the
    /// vocabulary is wider than the bad words, so they never leave it without a token).
    #[test]
    fn no_sampled_token_completes_a_bad_word(
        logits in prop::collection::vec(-4.0f32..4.0, 24),
        output in prop::collection::vec(0u32..6, 0..12),
        words in prop::collection::vec(prop::collection::vec(0u32..6, 1..4), 1..6),
        temperature in prop_oneof![Just(0.0f32), 0.5f32..1.5],
        seed in 0u64..1000,
    ) {
        let params = ruled(temperature, LogitRules {
            bad_words: words.clone(),
            ..LogitRules::default()
        });
        let mut rng = StdRng::seed_from_u64(seed);
        let token = Sampler::new(&[EOS]).sample(&logits, &params, &[], &output, &mut rng);
        for word in &words {
            let (last, prefix) = word.split_last().unwrap();
            prop_assert!(
                !(output.ends_with(prefix) && token == *last),
                "{token} completes {word:?} after {output:?}"
            );
        }
    }
}
