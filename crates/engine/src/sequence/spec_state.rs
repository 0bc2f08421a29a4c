//! A sequence's speculative-decoding state, kept apart from its plain decoding state: how many
//! unverified drafts sit at the end of its tokens, how far a draft model's cache has followed
//! it, and how its drafts have fared (the acceptance rate the policy weighs, totals for its
//! log line).

use crate::stats::SpecSummary;

#[derive(Debug, Clone, Default)]
pub struct SpecState {
    /// Drafts at the end of the sequence's tokens this step, not yet verified. Written only
    /// through `Sequence::attach_drafts` / `Sequence::settle_drafts`.
    pub(super) num_drafts: usize,
    /// Leading tokens whose K/V a draft model holds in its cache.
    pub draft_computed: usize,
    /// Per-token acceptance history, for the policy's choice of k.
    pub acceptance: Acceptance,
    rounds: usize,
    drafted: usize,
    accepted: usize,
}

impl SpecState {
    /// Unverified drafts at the end of the sequence's tokens.
    pub fn num_drafts(&self) -> usize {
        self.num_drafts
    }

    /// One verification round: `accepted` of `drafted` drafts were kept.
    pub fn record_round(&mut self, drafted: usize, accepted: usize) {
        self.acceptance.record(drafted, accepted);
        self.rounds += 1;
        self.drafted += drafted;
        self.accepted += accepted;
    }

    /// How speculation went, if the sequence ever speculated.
    pub fn summary(&self) -> Option<SpecSummary> {
        (self.rounds > 0).then_some(SpecSummary {
            rounds: self.rounds,
            drafted: self.drafted,
            accepted: self.accepted,
        })
    }
}

/// Prior acceptance for a sequence that has not speculated yet.
const PRIOR_ACCEPTANCE: f64 = 0.6;
/// Weight of a new round in the decayed history.
const EMA_WEIGHT: f64 = 0.2;

/// A sequence's acceptance history: accepted drafts and rejection events, decayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Acceptance {
    accepted: f64,
    trials: f64,
}

impl Default for Acceptance {
    fn default() -> Self {
        // One pseudo-round at the prior.
        Self {
            accepted: PRIOR_ACCEPTANCE,
            trials: 1.0,
        }
    }
}

impl Acceptance {
    /// Per-token acceptance probability, by maximum likelihood under a geometric model.
    pub fn rate(&self) -> f64 {
        (self.accepted / self.trials).clamp(0.0, 0.999)
    }

    /// `accepted` of `drafted` drafts were kept (a rejection ends the round early).
    pub fn record(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        let rejected = if accepted < drafted { 1.0 } else { 0.0 };
        let decay = 1.0 - EMA_WEIGHT;
        self.accepted = self.accepted * decay + accepted as f64;
        self.trials = self.trials * decay + accepted as f64 + rejected;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptance_estimate_converges_to_the_geometric_rate() {
        // Rounds of 4 drafts with a per-token acceptance of 0.75: accepted counts 0..=4
        // with P(n) = 0.75^n * 0.25 (n < 4), P(4) = 0.75^4, fed in proportion.
        let mut a = Acceptance::default();
        let pattern = [0, 1, 1, 2, 2, 3, 4, 4, 4, 4, 3, 2, 4, 1, 4, 3];
        for _ in 0..50 {
            for &n in &pattern {
                a.record(4, n);
            }
        }
        let accepted: usize = pattern.iter().sum();
        let rejections = pattern.iter().filter(|&&n| n < 4).count();
        let mle = accepted as f64 / (accepted + rejections) as f64;
        assert!((a.rate() - mle).abs() < 0.05, "{} vs {mle}", a.rate());
    }
}
