//! What was measured about one request.

use serde::Serialize;

use crate::config::Slo;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "status", content = "error")]
pub enum Outcome {
    Success,
    Failed(String),
}

/// Times are seconds; `ttft` and `e2e` count from just before the request was written.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    pub session: usize,
    pub turn: usize,
    /// When it was sent, in seconds after the run started.
    pub sent_at: f64,
    pub outcome: Outcome,
    pub ttft: Option<f64>,
    /// Gaps between consecutive chunks that carried tokens.
    pub itls: Vec<f64>,
    pub e2e: f64,
    /// From `usage` when the server reported it, else the client's estimate.
    pub prompt_tokens: usize,
    /// From `usage` when the server reported it, else the number of token-carrying chunks.
    pub output_tokens: usize,
    pub token_chunks: usize,
    pub usage_reported: bool,
    /// `usage.prompt_tokens_details.cached_tokens`, when the server reports it.
    pub cached_tokens: Option<usize>,
    /// The generated text (the next turn of a conversation includes it).
    #[serde(skip)]
    pub text: String,
}

impl RequestRecord {
    pub fn succeeded(&self) -> bool {
        self.outcome == Outcome::Success
    }

    /// (e2e − TTFT) / (output tokens − 1); `None` for single-token answers.
    pub fn tpot(&self) -> Option<f64> {
        let ttft = self.ttft?;
        (self.output_tokens > 1).then(|| (self.e2e - ttft) / (self.output_tokens - 1) as f64)
    }

    /// Whether a successful request met every objective in `slo` (times there are in ms).
    pub fn meets(&self, slo: &Slo) -> bool {
        let within = |bound: Option<f64>, seconds: Option<f64>| match (bound, seconds) {
            (None, _) => true,
            (Some(b), Some(s)) => s * 1000.0 <= b,
            // A bound on something that was not measured (TPOT of a one-token answer) holds.
            (Some(_), None) => true,
        };
        let max_itl = self
            .itls
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        self.succeeded()
            && self.ttft.is_some()
            && within(slo.ttft_ms, self.ttft)
            && within(slo.itl_ms, max_itl)
            && within(slo.tpot_ms, self.tpot())
            && within(slo.e2e_ms, Some(self.e2e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ttft: f64, itls: Vec<f64>, e2e: f64, output_tokens: usize) -> RequestRecord {
        RequestRecord {
            session: 0,
            turn: 0,
            sent_at: 0.0,
            outcome: Outcome::Success,
            ttft: Some(ttft),
            itls,
            e2e,
            prompt_tokens: 10,
            output_tokens,
            token_chunks: output_tokens,
            usage_reported: true,
            cached_tokens: None,
            text: String::new(),
        }
    }

    #[test]
    fn tpot_spreads_the_time_after_the_first_token() {
        let r = record(0.5, vec![0.1; 4], 0.9, 5);
        assert!((r.tpot().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(record(0.5, vec![], 0.5, 1).tpot(), None);
    }

    #[test]
    fn slos_bound_ttft_the_largest_gap_tpot_and_e2e() {
        let r = record(0.2, vec![0.05, 0.15, 0.05], 0.45, 4);
        let slo = |s: &str| s.parse::<Slo>().unwrap();
        assert!(r.meets(&slo("ttft=200")));
        assert!(!r.meets(&slo("ttft=199")));
        assert!(r.meets(&slo("itl=150")));
        assert!(!r.meets(&slo("itl=100")));
        assert!(r.meets(&slo("tpot=84,e2e=450")));
        assert!(!r.meets(&slo("tpot=83")));
        assert!(!r.meets(&slo("e2e=449")));
        let mut failed = r.clone();
        failed.outcome = Outcome::Failed("boom".into());
        assert!(!failed.meets(&slo("e2e=10s")));
    }
}
