//! How many tokens to draft this step, or none: a decision by measured cost.
//!
//! Each speculating sequence has an acceptance rate α (per drafted token, estimated from its
//! own history). With k drafts it emits on average `E(α, k) = 1 + α + … + α^k` tokens per
//! step. The step then costs a target pass over `k + 1` rows per sequence plus `k` draft steps,
//! against a target pass over one row per sequence without speculation. The policy keeps
//! running measurements of both costs and picks the k (0 included) with the most tokens per
//! second. So speculation is switched off by itself where it would lose: low acceptance, or a
//! batch large enough that extra verification rows cost as much as they save.
//!
//! Costs not yet measured are guessed optimistically (extra rows nearly free), so that every
//! k gets tried; a wrong guess costs one step and is then replaced by the measurement. Every
//! `EXPLORE_EVERY` steps the largest k is tried again, so the policy notices when a workload
//! changes. Steps that carry prompt chunks, or more decoding sequences than
//! `--speculative-disable-by-batch-size`, do not speculate at all (`Speculation::prepare`).

/// Weight of a new observation in the running averages.
const EMA_WEIGHT: f64 = 0.2;
/// Steps between forced explorations of the largest k, when such a step costs what a plain
/// one does (more in proportion when it costs more).
const EXPLORE_EVERY: u64 = 64;
/// Below this many scored drafts kept per sequence asked (decayed), a proposer that scores
/// its drafts is asked only every `EXPLORE_EVERY` steps.
const MIN_SCORED_YIELD: f64 = 0.05;

/// Expected tokens per step with `k` drafts at acceptance `alpha`: 1 + α + … + α^k.
pub fn expected_tokens(alpha: f64, k: usize) -> f64 {
    (0..=k).map(|i| alpha.powi(i as i32)).sum()
}

/// Running averages of a pass's duration by the number of rows it runs: exact row counts
/// up to 32, then eight points per doubling.
#[derive(Debug, Clone, Default)]
pub struct CostTable {
    /// (row count key, average seconds), sorted by key.
    points: Vec<(usize, f64)>,
}

fn key(rows: usize) -> usize {
    if rows <= 32 {
        return rows.max(1);
    }
    let step = 1usize << (usize::BITS - 1 - rows.leading_zeros() - 3);
    rows.div_ceil(step) * step
}

impl CostTable {
    pub fn record(&mut self, rows: usize, seconds: f64) {
        let k = key(rows);
        match self.points.binary_search_by_key(&k, |p| p.0) {
            Ok(i) => self.points[i].1 += EMA_WEIGHT * (seconds - self.points[i].1),
            Err(i) => self.points.insert(i, (k, seconds)),
        }
    }

    /// Whether some pass of at most `rows` rows was measured. Below the smallest measurement
    /// the estimate is that measurement, which may be a whole prompt chunk's: on a GPU, a
    /// 64-sequence decode step then looked as dear as an 8,192-token prefill, and every
    /// speculative step as a bargain beside it, at a large loss against plain decoding
    /// (measured: docs/performance.md, '2026-12-04 13:52-14:02 UTC, the speculation policy
    /// against a controlled acceptance rate').
    pub fn covers(&self, rows: usize) -> bool {
        self.points.first().is_some_and(|p| p.0 <= key(rows))
    }

    /// Estimated seconds for `rows`, `None` before any measurement: the measurement itself,
    /// else linear between the nearest measured neighbours. Past the largest measurement it
    /// is extrapolated as if extra rows were nearly free (optimism, so the policy tries
    /// them); below the smallest, the smallest measurement stands.
    pub fn estimate(&self, rows: usize) -> Option<f64> {
        let k = key(rows);
        let i = match self.points.binary_search_by_key(&k, |p| p.0) {
            Ok(i) => return Some(self.points[i].1),
            Err(i) => i,
        };
        let below = i.checked_sub(1).map(|j| self.points[j]);
        let above = self.points.get(i).copied();
        match (below, above) {
            (Some((r0, t0)), Some((r1, t1))) => {
                let f = (k - r0) as f64 / (r1 - r0) as f64;
                Some(t0 + f * (t1 - t0))
            }
            (Some((r0, t0)), None) => Some(t0 * (k as f64 / r0 as f64).sqrt()),
            (None, Some((_, t1))) => Some(t1),
            (None, None) => None,
        }
    }
}

/// The per-step choice of k.
#[derive(Debug, Clone)]
pub struct SpecPolicy {
    pub max_k: usize,
    /// Always draft `max_k` (for measurements and tests) instead of choosing by cost.
    pub fixed: bool,
    target: CostTable,
    /// One draft step over n sequences (nothing recorded for model-free proposers).
    draft: CostTable,
    steps: u64,
    /// The step of the last forced trial of `max_k`.
    last_explored: u64,
    /// Scored drafts kept per sequence asked, decayed: near 0 when the proposer's drafts never
    /// pay (nothing to copy), and then asking at every step is host time for nothing.
    scored_yield: f64,
}

impl SpecPolicy {
    pub fn new(max_k: usize) -> Self {
        Self {
            max_k,
            fixed: false,
            target: CostTable::default(),
            draft: CostTable::default(),
            steps: 0,
            last_explored: 0,
            scored_yield: 1.0,
        }
    }

    pub fn record_target(&mut self, rows: usize, seconds: f64) {
        self.target.record(rows, seconds);
    }

    pub fn record_draft_step(&mut self, seqs: usize, seconds: f64) {
        self.draft.record(seqs, seconds);
    }

    /// Drafts to ask of a proposer that scores them, for a step of `rows` rows without drafts:
    /// `max_k`, once a plain step of that size has been measured (0 before, so that it is).
    pub fn cap_for_scored_drafts(&mut self, rows: usize) -> usize {
        self.steps += 1;
        if self.fixed {
            return self.max_k;
        }
        if !self.target.covers(rows) {
            return 0;
        }
        if self.scored_yield < MIN_SCORED_YIELD && !self.steps.is_multiple_of(EXPLORE_EVERY) {
            return 0;
        }
        self.max_k
    }

    /// A step kept `kept` scored drafts of the proposals for `asked` sequences.
    pub fn record_scored_yield(&mut self, kept: usize, asked: usize) {
        if asked > 0 {
            let sample = kept as f64 / asked as f64;
            self.scored_yield += EMA_WEIGHT * (sample - self.scored_yield);
        }
    }

    /// How many of a sequence's scored drafts to keep, where `chances[i]` is the chance that
    /// drafts `0..=i` are all accepted: the count with the most expected tokens per second
    /// for a step that, without these drafts, runs `rows` rows and emits `tokens` tokens.
    pub fn best_length(&self, chances: &[f64], rows: usize, tokens: f64) -> usize {
        let Some(plain) = self.target.estimate(rows) else {
            return 0;
        };
        let mut best = (0, tokens / plain.max(1e-9));
        let mut expected = tokens;
        for (j, &chance) in chances.iter().enumerate() {
            expected += chance;
            let Some(verify) = self.target.estimate(rows + j + 1) else {
                break;
            };
            let rate = expected / verify.max(1e-9);
            if rate > best.1 {
                best = (j + 1, rate);
            }
        }
        best.0
    }

    /// Whether to try `max_k` again now, to notice a workload that changed: every
    /// `EXPLORE_EVERY` steps times how much dearer such a step is than a plain one, so that
    /// trials cost at most ~1/EXPLORE_EVERY of the time. (At a fixed period a GPU with a draft
    /// model lost much of its throughput to trials alone: each one moved every row's logits to
    /// the host. Measured: docs/performance.md, '2026-12-04 13:52-14:02 UTC', and 'Measurements
    /// formerly in source comments'.)
    fn exploration_due(&mut self, plain: f64, trial_rows: usize, draft_step: f64) -> bool {
        let trial =
            self.target.estimate(trial_rows).unwrap_or(plain) + self.max_k as f64 * draft_step;
        let period = (EXPLORE_EVERY as f64 * (trial / plain.max(1e-12)).max(1.0)).ceil() as u64;
        if self.steps - self.last_explored >= period {
            self.last_explored = self.steps;
            return true;
        }
        false
    }

    /// Drafts per sequence this step, for sequences with acceptance rates `alphas`, sharing
    /// the step with `other_rows` rows of other work.
    pub fn choose_k(&mut self, alphas: &[f64], other_rows: usize) -> usize {
        self.steps += 1;
        let seqs = alphas.len();
        if seqs == 0 || self.max_k == 0 {
            return 0;
        }
        if self.fixed {
            return self.max_k;
        }
        if !self.target.covers(other_rows + seqs) {
            // No plain step this small measured yet: measure one first.
            return 0;
        }
        let Some(plain) = self.target.estimate(other_rows + seqs) else {
            return 0;
        };
        let draft_step = self.draft.estimate(seqs).unwrap_or(0.0);
        if self.exploration_due(plain, other_rows + seqs * (self.max_k + 1), draft_step) {
            return self.max_k;
        }
        let mut best = (0, seqs as f64 / plain.max(1e-9));
        for k in 1..=self.max_k {
            let Some(verify) = self.target.estimate(other_rows + seqs * (k + 1)) else {
                break;
            };
            let tokens: f64 = alphas.iter().map(|&a| expected_tokens(a, k)).sum();
            let rate = tokens / (verify + k as f64 * draft_step).max(1e-9);
            if rate > best.1 {
                best = (k, rate);
            }
        }
        best.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_tokens_is_the_geometric_sum() {
        assert_eq!(expected_tokens(0.5, 0), 1.0);
        assert!((expected_tokens(0.5, 3) - 1.875).abs() < 1e-12);
        assert!((expected_tokens(1.0, 4) - 5.0).abs() < 1e-12);
    }

    fn policy_with(costs: &[(usize, f64)], draft: f64) -> SpecPolicy {
        let mut p = SpecPolicy::new(4);
        for &(rows, secs) in costs {
            p.record_target(rows, secs);
        }
        p.record_draft_step(1, draft);
        p
    }

    #[test]
    fn speculates_when_rows_are_cheap_and_drafts_are_good() {
        // Batch-1 decode: verifying 5 rows costs 1.3x one row, drafts are nearly free.
        let mut p = policy_with(&[(1, 0.040), (2, 0.044), (4, 0.050), (5, 0.052)], 0.001);
        assert_eq!(p.choose_k(&[0.8], 0), 4);
    }

    #[test]
    fn does_not_speculate_when_acceptance_is_low_or_rows_cost_full_price() {
        let mut p = policy_with(&[(1, 0.040), (2, 0.044), (4, 0.050), (5, 0.052)], 0.001);
        assert_eq!(p.choose_k(&[0.05], 0), 0);
        // A big batch where every row costs the same: 16 -> 80 rows is 5x the time.
        let mut p = policy_with(&[(16, 0.16), (32, 0.32), (64, 0.64), (80, 0.80)], 0.001);
        assert_eq!(p.choose_k(&[0.7; 16], 0), 0);
        // An expensive draft model (half a target step per draft step) at modest acceptance.
        let mut p = policy_with(&[(1, 0.040), (2, 0.044), (4, 0.050), (5, 0.052)], 0.020);
        assert_eq!(p.choose_k(&[0.5], 0), 0);
    }

    #[test]
    fn scored_drafts_are_kept_while_their_chances_pay_for_their_rows() {
        // Each extra row costs a tenth of a plain step.
        let costs: Vec<(usize, f64)> = (1..=9).map(|r| (r, 0.9 + 0.1 * r as f64)).collect();
        let p = policy_with(&costs, 0.0);
        assert_eq!(p.best_length(&[0.95, 0.9, 0.85, 0.8], 1, 1.0), 4);
        // Chances that fall off a cliff: keep the likely head only.
        assert_eq!(p.best_length(&[0.95, 0.9, 0.03, 0.01], 1, 1.0), 2);
        assert_eq!(p.best_length(&[0.05, 0.01], 1, 1.0), 0);
        // Unmeasured plain step: nothing (measure first).
        let fresh = SpecPolicy::new(4);
        assert_eq!(fresh.best_length(&[0.99], 1, 1.0), 0);
    }

    #[test]
    fn unmeasured_costs_are_tried_and_exploration_comes_back() {
        let mut p = SpecPolicy::new(3);
        // Nothing measured: plain decoding first.
        assert_eq!(p.choose_k(&[0.9], 0), 0);
        // Only a long prompt chunk measured: a plain decode step is measured before any draft
        // is weighed against it (not guessed as dear as the chunk).
        p.record_target(2048, 0.500);
        assert_eq!(p.choose_k(&[0.9], 0), 0);
        assert_eq!(p.cap_for_scored_drafts(1), 0);
        p.record_target(1, 0.040);
        // Larger passes unmeasured: assumed cheap, so speculation is tried.
        assert!(p.choose_k(&[0.9], 0) > 0);
        // Measured as expensive: off, except for the periodic exploration, which comes back
        // after EXPLORE_EVERY steps times the trial's cost ratio (4x here).
        p.record_target(4, 0.160);
        p.record_target(2, 0.080);
        p.record_target(3, 0.120);
        let choices: Vec<usize> = (0..5 * EXPLORE_EVERY)
            .map(|_| p.choose_k(&[0.9], 0))
            .collect();
        let trials: Vec<usize> = (0..choices.len()).filter(|&i| choices[i] > 0).collect();
        assert_eq!(trials.len(), 1, "{choices:?}");
        assert!(trials[0] >= 3 * EXPLORE_EVERY as usize, "{trials:?}");
    }

    #[test]
    fn a_scored_proposer_whose_drafts_never_pay_is_asked_rarely() {
        let mut p = policy_with(&[(1, 0.040), (2, 0.041)], 0.0);
        assert_eq!(p.cap_for_scored_drafts(1), 4);
        for _ in 0..40 {
            p.record_scored_yield(0, 8);
        }
        let asked = (0..2 * EXPLORE_EVERY)
            .filter(|_| p.cap_for_scored_drafts(1) > 0)
            .count();
        assert_eq!(asked, 2);
        // Drafts kept again: asked at every step.
        for _ in 0..40 {
            p.record_scored_yield(8, 8);
        }
        assert!((0..10).all(|_| p.cap_for_scored_drafts(1) == 4));
    }
}
