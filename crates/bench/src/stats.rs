//! Summary statistics: mean, standard deviation and percentiles.

use serde::Serialize;

/// The `p`-th percentile (0..=100) of `sorted` (ascending), interpolating linearly between the
/// two nearest ranks: numpy's default method, which vLLM's and SGLang's benchmarks use.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let rank = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// Sample standard deviation (n - 1 in the denominator), as llama-bench reports it.
pub fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    var.sqrt()
}

/// One metric over a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for no samples (or only non-finite ones, which are dropped).
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Summary {
            count: sorted.len(),
            mean: mean(&sorted),
            std: stddev(&sorted),
            min: sorted[0],
            p50: percentile(&sorted, 50.0),
            p90: percentile(&sorted, 90.0),
            p99: percentile(&sorted, 99.0),
            max: sorted[sorted.len() - 1],
        })
    }

    /// The same summary in other units (seconds to milliseconds: 1000).
    pub fn scaled(self, k: f64) -> Summary {
        Summary {
            count: self.count,
            mean: self.mean * k,
            std: self.std * k,
            min: self.min * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
            p99: self.p99 * k,
            max: self.max * k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Known answers from numpy: `np.percentile(np.arange(1, 11), [0, 50, 90, 99, 100])`
    /// is `[1, 5.5, 9.1, 9.91, 10]`.
    #[test]
    fn percentiles_match_numpy_linear_interpolation() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!(close(percentile(&v, 0.0), 1.0));
        assert!(close(percentile(&v, 50.0), 5.5));
        assert!(close(percentile(&v, 90.0), 9.1));
        assert!(close(percentile(&v, 99.0), 9.91));
        assert!(close(percentile(&v, 100.0), 10.0));
        // np.percentile([3, 1, 2, 10], [50, 75]) == [2.5, 4.75] (sorted 1 2 3 10; ranks 1.5, 2.25).
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert!(close(percentile(&[1.0, 2.0, 3.0, 10.0], 75.0), 4.75));
        assert!(close(s.p50, 2.5));
        assert!(close(s.mean, 4.0));
        assert!(close(s.max, 10.0) && close(s.min, 1.0));
    }

    #[test]
    fn stddev_is_the_sample_one() {
        // statistics.stdev([2, 4, 4, 4, 5, 5, 7, 9]) == 2.138089935299395
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!((stddev(&v) - 2.138089935299395).abs() < 1e-12);
        assert_eq!(stddev(&[5.0]), 0.0);
    }

    #[test]
    fn empty_and_single_samples() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
        let one = Summary::of(&[7.0]).unwrap();
        assert_eq!((one.p50, one.p99, one.count), (7.0, 7.0, 1));
    }
}
