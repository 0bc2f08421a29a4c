//! The acceptance rule against its definition: greedy equality, and for sampling, a chi-square
//! test that the emitted tokens follow the target's distribution exactly — with a check that
//! the same test rejects two classic wrong rules, so it is known to have teeth.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::distribution::Candidate;
use crate::distribution::Distribution;

#[test]
fn greedy_keeps_the_matching_prefix_then_corrects() {
    let target = [5u32, 6, 9, 4];
    let verdict = verify_greedy(&[5, 6, 7], |j| target[j]);
    assert_eq!(
        verdict,
        Verdict {
            accepted: 2,
            next: 9
        }
    );
    let all = verify_greedy(&[5, 6, 9], |j| target[j]);
    assert_eq!(
        all,
        Verdict {
            accepted: 3,
            next: 4
        }
    );
    let none = verify_greedy(&[1], |j| target[j]);
    assert_eq!(
        none,
        Verdict {
            accepted: 0,
            next: 5
        }
    );
    assert_eq!(verify_greedy(&[], |j| target[j]).next, 5);
}

const VOCAB: usize = 6;

/// A Markov "model": the distribution of the next token given the previous one.
struct Chain(Vec<Vec<f64>>);

impl Chain {
    fn random(rng: &mut StdRng, zeros: &[(usize, usize)]) -> Chain {
        let mut rows: Vec<Vec<f64>> = (0..VOCAB)
            .map(|_| (0..VOCAB).map(|_| rng.random_range(0.05..1.0)).collect())
            .collect();
        for &(prev, token) in zeros {
            rows[prev][token] = 0.0;
        }
        Chain(rows)
    }

    fn dist(&self, prev: u32) -> Distribution {
        Distribution::new(
            self.0[prev as usize]
                .iter()
                .enumerate()
                .map(|(t, &w)| Candidate {
                    token: t as u32,
                    logit: 0.0,
                    weight: w,
                })
                .collect(),
        )
    }

    fn prob(&self, prev: u32, token: u32) -> f64 {
        let row = &self.0[prev as usize];
        row[token as usize] / row.iter().sum::<f64>()
    }
}

type Rule =
    fn(&[u32], &[Distribution], &mut dyn FnMut(usize) -> Distribution, &mut StdRng) -> Verdict;

fn real_rule(
    drafts: &[u32],
    q: &[Distribution],
    p: &mut dyn FnMut(usize) -> Distribution,
    rng: &mut StdRng,
) -> Verdict {
    verify_sampled(drafts, q, p, rng)
}

/// Wrong: at a rejection, resample from p instead of the residual max(0, p − q).
fn residual_is_p(
    drafts: &[u32],
    q: &[Distribution],
    p: &mut dyn FnMut(usize) -> Distribution,
    rng: &mut StdRng,
) -> Verdict {
    for (j, (&t, qj)) in drafts.iter().zip(q).enumerate() {
        let pj = p(j);
        if rng.random::<f64>() * qj.prob(t) >= pj.prob(t) {
            return Verdict {
                accepted: j,
                next: pj.sample(rng).unwrap(),
            };
        }
    }
    Verdict {
        accepted: drafts.len(),
        next: p(drafts.len()).sample(rng).unwrap(),
    }
}

/// Wrong: accept with probability p(x) instead of min(1, p(x)/q(x)).
fn accept_with_p(
    drafts: &[u32],
    q: &[Distribution],
    p: &mut dyn FnMut(usize) -> Distribution,
    rng: &mut StdRng,
) -> Verdict {
    for (j, (&t, qj)) in drafts.iter().zip(q).enumerate() {
        let pj = p(j);
        if rng.random::<f64>() >= pj.prob(t) {
            return Verdict {
                accepted: j,
                next: residual_sample(&pj, qj, rng),
            };
        }
    }
    Verdict {
        accepted: drafts.len(),
        next: p(drafts.len()).sample(rng).unwrap(),
    }
}

/// Pearson's chi-square of the first two emitted tokens against the target chain's exact
/// joint distribution, over `rounds` speculative generations of `k` drafts each.
fn chi_square(rule: Rule, k: usize, rounds: usize, seed: u64) -> f64 {
    let mut setup = StdRng::seed_from_u64(1234);
    // The draft puts no mass where the target has some, and vice versa, in a few places.
    let target = Chain::random(&mut setup, &[(0, 1), (2, 2), (4, 0)]);
    let draft = Chain::random(&mut setup, &[(0, 3), (1, 1), (3, 5)]);
    let start = 0u32;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = vec![0u64; VOCAB * VOCAB];
    for _ in 0..rounds {
        let mut emitted: Vec<u32> = Vec::new();
        let mut last = start;
        while emitted.len() < 2 {
            let mut drafts = Vec::with_capacity(k);
            let mut q = Vec::with_capacity(k);
            let mut prev = last;
            for _ in 0..k {
                let dist = draft.dist(prev);
                let token = dist.sample(&mut rng).unwrap();
                drafts.push(token);
                q.push(dist);
                prev = token;
            }
            let context = last;
            let d = drafts.clone();
            let mut p = |j: usize| target.dist(if j == 0 { context } else { d[j - 1] });
            let verdict = rule(&drafts, &q, &mut p, &mut rng);
            emitted.extend_from_slice(&drafts[..verdict.accepted]);
            emitted.push(verdict.next);
            last = *emitted.last().unwrap();
        }
        counts[emitted[0] as usize * VOCAB + emitted[1] as usize] += 1;
    }
    let mut chi2 = 0.0;
    for a in 0..VOCAB as u32 {
        for b in 0..VOCAB as u32 {
            let expected = rounds as f64 * target.prob(start, a) * target.prob(a, b);
            let observed = counts[(a as usize) * VOCAB + b as usize] as f64;
            if expected == 0.0 {
                assert_eq!(
                    observed, 0.0,
                    "token pair ({a}, {b}) has target probability 0"
                );
            } else {
                chi2 += (observed - expected).powi(2) / expected;
            }
        }
    }
    chi2
}

/// 33 cells with mass (36 minus the target's three zeros), 32 degrees of freedom: the
/// 99.99th percentile of chi-square(32) is about 70.
const CRITICAL: f64 = 70.0;

#[test]
fn sampled_verification_emits_the_target_distribution() {
    for (k, seed) in [(1, 1), (3, 2), (5, 3)] {
        let chi2 = chi_square(real_rule, k, 200_000, seed);
        eprintln!("real rule, k={k}: chi-square {chi2:.1} (critical {CRITICAL})");
        assert!(chi2 < CRITICAL, "k={k}: chi-square {chi2:.1} >= {CRITICAL}");
    }
}

#[test]
fn the_distribution_test_rejects_wrong_rules() {
    let residual = chi_square(residual_is_p, 3, 200_000, 4);
    assert!(
        residual > CRITICAL,
        "resampling from p passed: {residual:.1}"
    );
    let accept = chi_square(accept_with_p, 3, 200_000, 5);
    eprintln!("residual = p: chi-square {residual:.1}; accept with p(x): {accept:.1}");
    assert!(accept > CRITICAL, "accepting with p(x) passed: {accept:.1}");
}

#[test]
fn point_mass_drafts_reject_into_p_without_the_draft() {
    // An n-gram proposal is a point mass q: a rejected draft can never come back as the
    // correction, and everything else keeps p's proportions.
    let p = Distribution::new(
        [(0u32, 1.0), (1, 2.0), (2, 1.0)]
            .into_iter()
            .map(|(token, weight)| Candidate {
                token,
                logit: 0.0,
                weight,
            })
            .collect(),
    );
    let mut rng = StdRng::seed_from_u64(9);
    let mut counts = [0usize; 3];
    let mut accepted = 0;
    let n = 100_000;
    for _ in 0..n {
        let verdict = verify_sampled(&[1], &[Distribution::point(1)], |_| p.clone(), &mut rng);
        if verdict.accepted == 1 {
            accepted += 1;
        } else {
            assert_ne!(verdict.next, 1);
            counts[verdict.next as usize] += 1;
        }
    }
    // Accepted with probability p(1) = 1/2; rejections split evenly between 0 and 2.
    let rate = accepted as f64 / n as f64;
    assert!((rate - 0.5).abs() < 0.01, "acceptance rate {rate}");
    let ratio = counts[0] as f64 / counts[2] as f64;
    assert!((ratio - 1.0).abs() < 0.05, "0:2 ratio {ratio}");
}
