//! When requests are issued: a Poisson process at a given rate, or as fast as allowed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Gaps between consecutive arrivals, in seconds: exponential with mean `1 / rate`, so that
/// arrivals form a Poisson process; all zero without a rate (every request is due at once and
/// only `--max-concurrency` holds them back).
#[derive(Debug)]
pub struct Arrivals {
    rate: Option<f64>,
    rng: StdRng,
}

impl Arrivals {
    pub fn new(rate: Option<f64>, seed: u64) -> Self {
        Self {
            rate,
            // A stream of its own, so that the arrival times do not depend on the workload.
            rng: StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15),
        }
    }

    /// The gap before the next arrival.
    pub fn next_gap(&mut self) -> f64 {
        match self.rate {
            None => 0.0,
            Some(rate) => {
                // Inverse transform: U in (0, 1], so -ln(U) is finite and >= 0.
                let u: f64 = 1.0 - self.rng.random::<f64>();
                -u.ln() / rate
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_gaps_have_mean_and_spread_of_an_exponential() {
        let rate = 4.0;
        let mut a = Arrivals::new(Some(rate), 7);
        let gaps: Vec<f64> = (0..100_000).map(|_| a.next_gap()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // The standard error of the mean is 0.25 / sqrt(1e5) ~ 0.0008; 1% of 0.25 is 3 of them.
        assert!((mean - 1.0 / rate).abs() < 0.0025, "mean {mean}");
        // An exponential's standard deviation equals its mean, and P(gap > mean) = 1/e.
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((var.sqrt() - 0.25).abs() < 0.01, "sd {}", var.sqrt());
        let above = gaps.iter().filter(|&&g| g > 0.25).count() as f64 / gaps.len() as f64;
        assert!(
            (above - (-1.0f64).exp()).abs() < 0.01,
            "P(gap > mean) {above}"
        );
        assert!(gaps.iter().all(|g| g.is_finite() && *g >= 0.0));
    }

    #[test]
    fn the_same_seed_gives_the_same_arrivals() {
        let mut a = Arrivals::new(Some(10.0), 3);
        let mut b = Arrivals::new(Some(10.0), 3);
        let mut c = Arrivals::new(Some(10.0), 4);
        let (x, y, z): (Vec<f64>, Vec<f64>, Vec<f64>) = (
            (0..50).map(|_| a.next_gap()).collect(),
            (0..50).map(|_| b.next_gap()).collect(),
            (0..50).map(|_| c.next_gap()).collect(),
        );
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert_eq!(Arrivals::new(None, 0).next_gap(), 0.0);
    }
}
