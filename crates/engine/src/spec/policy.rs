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
//! k gets tried; a wrong guess costs one step and is then replaced by the measurement.
//!
//! A cost model misses costs: a draft model catching up after a pause, verification rows
//! crowding a step, a batch whose slowest member sets its length. So a guard watches what
//! whole decode steps actually delivered (tokens per second, per batch-size class, with and
//! without drafts) and keeps speculation off where it delivered less than plain decoding.
//! Every `EXPLORE_EVERY` steps a window of `EXPLORE_WINDOW` steps speculates regardless, so
//! the guard's measurement stays current when the workload changes. Steps that carry prompt
//! chunks do not speculate at all (`Speculation::prepare`).

/// Steps of realized throughput a batch size needs in a mode before the guard compares it.
const MIN_REALIZED_STEPS: u32 = 4;
/// Consecutive steps of each exploration (a draft model's first step after a pause catches up
/// on what it missed; a window spreads that over several steps, as steady speculation would).
const EXPLORE_WINDOW: u64 = 6;
/// Weight of a new step in the realized-throughput averages.
const REALIZED_WEIGHT: f64 = 0.25;

/// Prior acceptance for a sequence that has not speculated yet.
const PRIOR_ACCEPTANCE: f64 = 0.6;
/// Weight of a new observation in the running averages.
const EMA_WEIGHT: f64 = 0.2;
/// Steps between forced explorations of the largest k.
const EXPLORE_EVERY: u64 = 128;

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

/// Decode tokens per second actually delivered by whole steps (drafting, verification,
/// bookkeeping and a draft model's catching up included), for one mode at one batch size.
#[derive(Debug, Clone, Copy, Default)]
struct Realized {
    rate: f64,
    steps: u32,
}

impl Realized {
    fn record(&mut self, rate: f64) {
        self.rate = if self.steps == 0 {
            rate
        } else {
            self.rate + REALIZED_WEIGHT * (rate - self.rate)
        };
        self.steps = self.steps.saturating_add(1);
    }
    fn known(&self) -> Option<f64> {
        (self.steps >= MIN_REALIZED_STEPS).then_some(self.rate)
    }
}

/// Batch sizes that share realized-throughput averages: 1, 2-3, 4-7, 8-15, ...
fn size_class(seqs: usize) -> usize {
    (usize::BITS - seqs.max(1).leading_zeros()) as usize
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
    /// Realized throughput by size class: (plain, speculative).
    realized: Vec<(Realized, Realized)>,
    /// Whether the last recorded step speculated.
    speculated_last: bool,
    steps: u64,
}

impl SpecPolicy {
    pub fn new(max_k: usize) -> Self {
        Self {
            max_k,
            fixed: false,
            target: CostTable::default(),
            draft: CostTable::default(),
            realized: Vec::new(),
            speculated_last: false,
            steps: 0,
        }
    }

    pub fn record_target(&mut self, rows: usize, seconds: f64) {
        self.target.record(rows, seconds);
    }

    pub fn record_draft_step(&mut self, seqs: usize, seconds: f64) {
        self.draft.record(seqs, seconds);
    }

    /// A decode-only step over `seqs` sequences delivered `tokens` tokens in `seconds`, with
    /// drafts (`speculated`) or without.
    pub fn record_step(&mut self, seqs: usize, tokens: usize, seconds: f64, speculated: bool) {
        // The first speculative step after plain ones carries a draft model's catching up on
        // what it missed: a cost of switching, not of speculating.
        let switching = speculated && !self.speculated_last;
        self.speculated_last = speculated;
        if seqs == 0 || seconds <= 0.0 || switching {
            return;
        }
        let class = size_class(seqs);
        if self.realized.len() <= class {
            self.realized.resize(class + 1, Default::default());
        }
        let (plain, spec) = &mut self.realized[class];
        let rate = tokens as f64 / seconds;
        if speculated {
            spec.record(rate);
        } else {
            plain.record(rate);
        }
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
        let Some(plain) = self.target.estimate(other_rows + seqs) else {
            // Nothing measured yet: measure plain decoding first.
            return 0;
        };
        let draft_step = self.draft.estimate(seqs).unwrap_or(0.0);
        let mut best = (0, seqs as f64 / plain.max(1e-9));
        let mut best_speculative = (1, 0.0);
        for k in 1..=self.max_k {
            let Some(verify) = self.target.estimate(other_rows + seqs * (k + 1)) else {
                break;
            };
            let tokens: f64 = alphas.iter().map(|&a| expected_tokens(a, k)).sum();
            let rate = tokens / (verify + k as f64 * draft_step).max(1e-9);
            if rate > best.1 {
                best = (k, rate);
            }
            if rate > best_speculative.1 {
                best_speculative = (k, rate);
            }
        }
        // The guard: what whole steps really delivered at this batch size. Plain decoding is
        // measured first; speculation stays off where it delivered less, except in the
        // periodic exploration windows that keep its measurement current.
        let (realized_plain, realized_spec) = self
            .realized
            .get(size_class(seqs))
            .map_or((None, None), |(p, s)| (p.known(), s.known()));
        let Some(realized_plain) = realized_plain else {
            return 0;
        };
        if self.steps % EXPLORE_EVERY >= EXPLORE_EVERY - EXPLORE_WINDOW {
            return best_speculative.0;
        }
        if realized_spec.is_some_and(|spec| spec < realized_plain) {
            return 0;
        }
        best.0
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

    #[test]
    fn expected_tokens_is_the_geometric_sum() {
        assert_eq!(expected_tokens(0.5, 0), 1.0);
        assert!((expected_tokens(0.5, 3) - 1.875).abs() < 1e-12);
        assert!((expected_tokens(1.0, 4) - 5.0).abs() < 1e-12);
    }

    /// Plain decoding measured at batch sizes 1 and 16 (what the guard needs first).
    fn with_plain_steps(mut p: SpecPolicy) -> SpecPolicy {
        for _ in 0..MIN_REALIZED_STEPS {
            p.record_step(1, 1, 0.040, false);
            p.record_step(16, 16, 0.16, false);
        }
        p
    }

    fn policy_with(costs: &[(usize, f64)], draft: f64) -> SpecPolicy {
        let mut p = SpecPolicy::new(4);
        for &(rows, secs) in costs {
            p.record_target(rows, secs);
        }
        p.record_draft_step(1, draft);
        with_plain_steps(p)
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
    fn unmeasured_costs_are_tried_and_exploration_comes_back() {
        let mut p = SpecPolicy::new(3);
        // Nothing measured: plain decoding first.
        assert_eq!(p.choose_k(&[0.9], 0), 0);
        p.record_target(1, 0.040);
        // Still no realized plain throughput at this batch size: plain.
        assert_eq!(p.choose_k(&[0.9], 0), 0);
        let mut p = with_plain_steps(p);
        // Larger passes unmeasured: assumed cheap, so speculation is tried.
        assert!(p.choose_k(&[0.9], 0) > 0);
        // Measured as expensive: off, except for the periodic exploration window.
        p.record_target(4, 0.160);
        p.record_target(2, 0.080);
        p.record_target(3, 0.120);
        let choices: Vec<usize> = (0..EXPLORE_EVERY).map(|_| p.choose_k(&[0.9], 0)).collect();
        let explored = choices.iter().filter(|&&k| k > 0).count() as u64;
        assert_eq!(explored, EXPLORE_WINDOW, "{choices:?}");
    }

    #[test]
    fn the_guard_turns_speculation_off_where_whole_steps_delivered_less() {
        // The cost model expects a win (cheap rows, free drafts, high acceptance) ...
        let mut p = policy_with(&[(1, 0.040), (2, 0.044), (4, 0.050), (5, 0.052)], 0.001);
        assert_eq!(p.choose_k(&[0.9], 0), 4);
        // ... but speculative steps delivered 20 tok/s against plain's 25. The first of
        // them (the switch, with the draft catching up) is not counted: after it, four more
        // are needed before the guard acts.
        for _ in 0..=MIN_REALIZED_STEPS {
            assert_eq!(p.choose_k(&[0.9], 0), 4);
            p.record_step(1, 2, 0.100, true);
        }
        assert_eq!(p.choose_k(&[0.9], 0), 0);
        // Speculation that delivers more stays on.
        let mut p = policy_with(&[(1, 0.040), (2, 0.044), (4, 0.050), (5, 0.052)], 0.001);
        for _ in 0..=MIN_REALIZED_STEPS {
            p.record_step(1, 3, 0.060, true);
        }
        assert_eq!(p.choose_k(&[0.9], 0), 4);
    }
}
