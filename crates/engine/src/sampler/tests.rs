use std::collections::BTreeSet;

use proptest::prelude::*;
use rand::SeedableRng;

use super::*;

fn params(temperature: f32) -> SamplingParams {
    SamplingParams {
        temperature,
        ..SamplingParams::default()
    }
}

/// Reference filter: full sort, then min-p, top-k, top-p exactly as the spec words them, in
/// f64. Every filter keeps a prefix of the ranking, so the answer is a length; with it comes
/// whether the decision at each rank was within rounding of its threshold (where an f32
/// implementation may fairly decide either way).
struct Reference {
    ranked: Vec<u32>,
    kept: usize,
    borderline: Vec<bool>,
}

fn reference_support(logits: &[f32], p: &SamplingParams) -> Reference {
    const TOLERANCE: f64 = 1e-5;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let t = p.temperature as f64;
    let mut ranked: Vec<(u32, f32, f64)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, l, ((l as f64 - max) / t).exp()))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut borderline = vec![false; ranked.len()];
    // The weight is the probability relative to the most likely token (whose weight is 1).
    let mut kept = 0;
    for (i, &(_, _, w)) in ranked.iter().enumerate() {
        borderline[i] |= (w - p.min_p as f64).abs() < TOLERANCE;
        if w >= p.min_p as f64 {
            kept = i + 1;
        }
    }
    if p.top_k > 0 {
        kept = kept.min(p.top_k);
    }
    let total: f64 = ranked[..kept].iter().map(|r| r.2).sum();
    let target = p.top_p as f64 * total;
    let mut cumulative = 0.0;
    let mut nucleus = kept;
    for (i, r) in ranked[..kept].iter().enumerate() {
        borderline[i] |= (cumulative - target).abs() < TOLERANCE * total;
        if cumulative >= target && nucleus == kept {
            nucleus = i;
        }
        cumulative += r.2;
    }
    Reference {
        ranked: ranked.iter().map(|r| r.0).collect(),
        kept: nucleus.max(1),
        borderline,
    }
}

fn logits_with_and_without_ties() -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![
        prop::collection::vec(-8.0f32..8.0, 1..2000),
        prop::collection::vec((-20i32..20).prop_map(|x| x as f32 * 0.25), 1..2000),
    ]
}

proptest! {
    #[test]
    fn greedy_is_the_first_argmax(logits in prop::collection::vec(-5i32..5, 1..200)) {
        let logits: Vec<f32> = logits.into_iter().map(|l| l as f32 * 0.5).collect();
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let expected = logits.iter().position(|&l| l == max).unwrap() as u32;
        let mut rng = StdRng::seed_from_u64(0);
        let got = Sampler::default().sample(&logits, &params(0.0), &[], &[], &mut rng);
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn filters_keep_exactly_the_reference_support(
        logits in logits_with_and_without_ties(),
        temperature in 0.2f32..2.0,
        top_k in prop_oneof![Just(0usize), 1usize..1500],
        top_p in prop_oneof![Just(1.0f32), 0.05f32..=1.0],
        min_p in prop_oneof![Just(0.0f32), 0.001f32..0.9],
    ) {
        let p = SamplingParams { temperature, top_k, top_p, min_p, ..SamplingParams::default() };
        let got: BTreeSet<u32> =
            Sampler::default().support(&logits, &p, &[], &[]).iter().map(|c| c.token).collect();
        let reference = reference_support(&logits, &p);
        // Whatever was kept must be a prefix of the ranking...
        let kept = got.len();
        let prefix: BTreeSet<u32> = reference.ranked[..kept].iter().copied().collect();
        prop_assert_eq!(&got, &prefix);
        // ...of the reference's length, unless every decision in between was a rounding call.
        let (lo, hi) = (kept.min(reference.kept), kept.max(reference.kept));
        prop_assert!(
            (lo..hi).all(|i| reference.borderline[i]),
            "kept {} tokens, reference {}", kept, reference.kept
        );
    }

    #[test]
    fn logprobs_sum_to_one(logits in prop::collection::vec(-30.0f32..30.0, 1..500)) {
        let all = token_logprob(&logits, 0, logits.len());
        let mass: f64 = all.top.iter().map(|&(_, lp)| (lp as f64).exp()).sum();
        prop_assert!((mass - 1.0).abs() < 1e-4, "mass {}", mass);
        prop_assert!(all.top.windows(2).all(|w| w[0].1 >= w[1].1));
        prop_assert_eq!(all.top.iter().find(|t| t.0 == 0).unwrap().1, all.logprob);
    }
}

#[test]
fn greedy_ties_go_to_the_lowest_id() {
    let mut rng = StdRng::seed_from_u64(0);
    let got = Sampler::default().sample(&[1.0, 3.0, 3.0, 3.0], &params(0.0), &[], &[], &mut rng);
    assert_eq!(got, 1);
}

#[test]
fn temperature_sampling_matches_softmax_frequencies() {
    let logits = [1.0f32, 0.2, -0.5, 2.0, 0.0, 1.5];
    let temperature = 0.7f64;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| (l as f64 / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let draws = 30_000;
    let mut counts = [0usize; 6];
    let mut sampler = Sampler::default();
    let mut rng = StdRng::seed_from_u64(1234);
    for _ in 0..draws {
        counts[sampler.sample(&logits, &params(0.7), &[], &[], &mut rng) as usize] += 1;
    }
    let chi_square: f64 = counts
        .iter()
        .zip(&weights)
        .map(|(&c, &w)| {
            let expected = draws as f64 * w / total;
            (c as f64 - expected).powi(2) / expected
        })
        .sum();
    // 5 degrees of freedom: P(chi2 > 20.5) = 0.001.
    assert!(chi_square < 20.5, "chi2 {chi_square}, counts {counts:?}");
}

#[test]
fn same_seed_same_tokens() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
    let run = |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut sampler = Sampler::default();
        (0..40)
            .map(|_| sampler.sample(&logits, &params(1.0), &[], &[], &mut rng))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn penalties_match_hand_computed_values() {
    let logits = [2.0f32, -1.0, 0.5, 3.0];
    let p = SamplingParams {
        repetition_penalty: 2.0,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        ..params(1.0)
    };
    // Repetition over prompt {0} and output {1, 2}: 2/2 = 1, -1*2 = -2, 0.5/2 = 0.25; token 3
    // untouched. Then output counts {1: 2, 2: 1}: -2 - (2*0.5 + 0.25) = -3.25, 0.25 - 0.75 = -0.5.
    let mut support = Sampler::default().support(&logits, &p, &[0], &[1, 1, 2]);
    support.sort_by_key(|c| c.token);
    let penalized: Vec<f32> = support.iter().map(|c| c.logit).collect();
    assert_eq!(penalized, vec![1.0, -3.25, -0.5, 3.0]);
}

#[test]
fn logprobs_come_from_raw_logits_with_top_alternatives() {
    let logits = [0.0f32, (2.0f32).ln(), 0.0, (4.0f32).ln()];
    // softmax = [1, 2, 1, 4] / 8
    let lp = token_logprob(&logits, 1, 2);
    assert!((lp.logprob - (0.25f32).ln()).abs() < 1e-6);
    assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![3, 1]);
    assert!((lp.top[0].1 - (0.5f32).ln()).abs() < 1e-6);
}

#[test]
fn rank_counts_the_tokens_at_least_as_likely() {
    let logits = [1.0, 3.0, 2.0, 3.0];
    // Tied for best: both rank 2 (vLLM counts the tokens at least as likely).
    assert_eq!(token_logprob(&logits, 1, 0).rank, 2);
    assert_eq!(token_logprob(&logits, 3, 0).rank, 2);
    assert_eq!(token_logprob(&logits, 2, 0).rank, 3);
    assert_eq!(token_logprob(&logits, 0, 0).rank, 4);
    assert_eq!(token_logprob(&[0.5, 0.1], 0, 0).rank, 1);
}
