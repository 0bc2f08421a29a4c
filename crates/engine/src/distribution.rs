//! A distribution over token ids as a sampler draws from it, for speculative decoding, which
//! needs probabilities (not just draws) from both the draft and the target.

use rand::rngs::StdRng;
use rand::Rng;

/// A token still in the running, with its weight `exp((logit - max) / temperature)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub token: u32,
    pub logit: f32,
    pub weight: f64,
}

/// A distribution over token ids: candidates with unnormalised weights (the support a
/// sampler draws from).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution {
    pub candidates: Vec<Candidate>,
    pub total: f64,
}

impl Distribution {
    pub fn new(candidates: Vec<Candidate>) -> Self {
        let total = candidates.iter().map(|c| c.weight).sum();
        Self { candidates, total }
    }

    /// All mass on `token` (what a deterministic proposer such as n-gram lookup implies).
    pub fn point(token: u32) -> Self {
        Self::new(vec![Candidate {
            token,
            logit: 0.0,
            weight: 1.0,
        }])
    }

    pub fn prob(&self, token: u32) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        let weight: f64 = self
            .candidates
            .iter()
            .filter(|c| c.token == token)
            .map(|c| c.weight)
            .sum();
        weight / self.total
    }

    /// One draw (`None` for an empty distribution).
    pub fn sample(&self, rng: &mut StdRng) -> Option<u32> {
        draw(
            self.candidates.iter().map(|c| (c.token, c.weight)),
            self.total,
            rng,
        )
    }
}

/// Draws from `(token, weight)` pairs whose weights sum to `total`.
pub(crate) fn draw(
    items: impl Iterator<Item = (u32, f64)>,
    total: f64,
    rng: &mut StdRng,
) -> Option<u32> {
    let mut threshold = rng.random::<f64>() * total;
    let mut last = None;
    for (token, weight) in items {
        if weight <= 0.0 {
            continue;
        }
        last = Some(token);
        threshold -= weight;
        if threshold < 0.0 {
            return Some(token);
        }
    }
    // Rounding left a sliver past the last weight: it belongs to the last token.
    last
}
