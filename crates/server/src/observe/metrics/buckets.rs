//! Histogram bucket bounds: vLLM's, so that the same dashboards and SLO queries read ferrite.

/// `time_to_first_token_seconds`.
pub const TIME_TO_FIRST_TOKEN: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// `inter_token_latency_seconds`.
pub const INTER_TOKEN_LATENCY: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// Whole-request intervals: e2e, queue, prefill, decode.
pub const REQUEST_LATENCY: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// `iteration_tokens_total`: tokens computed in one engine step.
pub const ITERATION_TOKENS: &[f64] = &[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];

/// ferrite's `scheduler_step_seconds`: a phase of one step takes from microseconds (planning)
/// to seconds (a long prefill on a CPU), so the bounds span 10 µs to 10 s in 1-2.5-5 steps.
pub const SCHEDULER_STEP: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// 1, 2, 5, 10, 20, 50, ... up to and including `max` (vLLM's bounds for token counts).
pub fn one_two_five(max: usize) -> Vec<f64> {
    let mut bounds = Vec::new();
    let mut scale = 1usize;
    loop {
        for m in [1usize, 2, 5] {
            match m.checked_mul(scale) {
                Some(v) if v <= max => bounds.push(v as f64),
                _ => return bounds,
            }
        }
        scale = match scale.checked_mul(10) {
            Some(s) => s,
            None => return bounds,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_two_five_matches_vllms_examples() {
        // vLLM's docstring: build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100].
        assert_eq!(
            one_two_five(100),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(
            one_two_five(2048),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]
        );
        assert_eq!(one_two_five(0), Vec::<f64>::new());
        assert!(one_two_five(usize::MAX).len() > 50);
    }

    #[test]
    fn fixed_bounds_increase_strictly() {
        for b in [
            TIME_TO_FIRST_TOKEN,
            INTER_TOKEN_LATENCY,
            REQUEST_LATENCY,
            ITERATION_TOKENS,
            SCHEDULER_STEP,
        ] {
            assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        }
    }
}
