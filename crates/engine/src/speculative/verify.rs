//! Verification of speculative proposals: which drafted tokens the target model keeps.
//!
//! The rule (Leviathan et al. 2023, Chen et al. 2023): for drafts `d_1..d_k` proposed from draft
//! distributions `q_j`, and target distributions `p_j` (the target's sampling distribution at
//! each position, given the drafts before it), accept `d_j` with probability
//! `min(1, p_j(d_j) / q_j(d_j))`; at the first rejection draw the next token from
//! `norm(max(0, p_j − q_j))`; if all `k` are accepted, draw a bonus token from `p_{k+1}`. The
//! tokens that come out are distributed exactly as if the target had sampled them one by one.
//! Greedy requests accept by equality with the target's argmax, which makes the output
//! token-for-token the output of plain greedy decoding.

use rand::rngs::StdRng;
use rand::Rng;

use crate::distribution::{draw, Distribution};

/// What verification decided for one sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Drafts kept, a prefix of the proposal.
    pub accepted: usize,
    /// The token after them: the correction at the first rejection, or the bonus token.
    pub next: u32,
}

/// Greedy verification: `argmax(j)` is the target's choice at position `j` (0-based, given the
/// drafts before it), for `j` in `0..=drafts.len()`.
pub fn verify_greedy(drafts: &[u32], mut argmax: impl FnMut(usize) -> u32) -> Verdict {
    for (j, &draft) in drafts.iter().enumerate() {
        let best = argmax(j);
        if best != draft {
            return Verdict {
                accepted: j,
                next: best,
            };
        }
    }
    Verdict {
        accepted: drafts.len(),
        next: argmax(drafts.len()),
    }
}

/// Sampled verification. `target(j)` is `p_{j+1}`, the target's sampling distribution at
/// position `j` given the drafts before it, for `j` in `0..=drafts.len()`; `draft[j]` is the
/// distribution `drafts[j]` was drawn from.
pub fn verify_sampled(
    drafts: &[u32],
    draft: &[Distribution],
    mut target: impl FnMut(usize) -> Distribution,
    rng: &mut StdRng,
) -> Verdict {
    debug_assert_eq!(drafts.len(), draft.len());
    for (j, (&token, q)) in drafts.iter().zip(draft).enumerate() {
        let p = target(j);
        let (p_x, q_x) = (p.prob(token), q.prob(token));
        // q_x > 0 always holds for a token drawn from q; guard against a caller that lies.
        let keep = q_x > 0.0 && rng.random::<f64>() * q_x < p_x;
        if !keep {
            return Verdict {
                accepted: j,
                next: residual_sample(&p, q, rng),
            };
        }
    }
    let bonus = target(drafts.len());
    Verdict {
        accepted: drafts.len(),
        next: bonus.sample(rng).unwrap_or_default(),
    }
}

/// A draw from `norm(max(0, p − q))`; from `p` itself in the measure-zero case where the
/// residual has no mass (p ≤ q everywhere, so the rejection could not have happened).
fn residual_sample(p: &Distribution, q: &Distribution, rng: &mut StdRng) -> u32 {
    let q_of = dense_probabilities(q);
    let residual: Vec<(u32, f64)> = p
        .candidates
        .iter()
        .map(|c| {
            let p_x = c.weight / p.total;
            let q_x = q_of.get(c.token as usize).copied().unwrap_or(0.0);
            (c.token, (p_x - q_x).max(0.0))
        })
        .collect();
    let total: f64 = residual.iter().map(|r| r.1).sum();
    if total > 0.0 {
        if let Some(token) = draw(residual.into_iter(), total, rng) {
            return token;
        }
    }
    p.sample(rng).unwrap_or_default()
}

/// `q` as a table indexed by token id (a draft model's q spans the whole vocabulary, so
/// looking tokens up one by one would be quadratic).
fn dense_probabilities(q: &Distribution) -> Vec<f64> {
    let len = q
        .candidates
        .iter()
        .map(|c| c.token as usize + 1)
        .max()
        .unwrap_or(0);
    let mut dense = vec![0.0; len];
    if q.total > 0.0 {
        for c in &q.candidates {
            dense[c.token as usize] += c.weight / q.total;
        }
    }
    dense
}

#[cfg(test)]
mod tests;
