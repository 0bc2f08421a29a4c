//! `best_of` on `/v1/completions`: each prompt's `best_of` candidates generated, the `n` with
//! the highest mean log probability per token returned, best first (OpenAI's definition of
//! "best"). Every candidate's tokens count in `usage`, as OpenAI bills them.

use std::cmp::Ordering;

use super::submission::ChoiceResult;
use crate::error::ApiError;
use crate::openai::sampling::MAX_N;

/// The candidates per prompt when they are more than the `n` returned; `None` otherwise
/// (absent, or equal to `n`: nothing to choose).
pub fn candidates(best_of: Option<i64>, n: usize, stream: bool) -> Result<Option<usize>, ApiError> {
    let Some(best_of) = best_of else {
        return Ok(None);
    };
    let refuse = |why: String| Err(ApiError::invalid_param("best_of", why));
    if best_of < n as i64 || best_of > MAX_N as i64 {
        return refuse(format!(
            "best_of must be between n ({n}) and {MAX_N}, got {best_of}"
        ));
    }
    let best_of = best_of as usize;
    if best_of == n {
        return Ok(None);
    }
    if stream {
        return refuse(
            "best_of greater than n cannot be streamed: the best are known only at the end".into(),
        );
    }
    Ok(Some(best_of))
}

/// From `results` (per prompt, `best_of` candidates in a row), each prompt's `n` best, best
/// first.
pub fn keep_best(results: Vec<ChoiceResult>, best_of: usize, n: usize) -> Vec<ChoiceResult> {
    let mut kept = Vec::with_capacity(results.len() / best_of * n);
    let mut results = results.into_iter();
    loop {
        let mut group: Vec<ChoiceResult> = results.by_ref().take(best_of).collect();
        if group.is_empty() {
            return kept;
        }
        // A stable sort: equal scores keep the order they were generated in.
        group.sort_by(|a, b| {
            mean_logprob(b)
                .partial_cmp(&mean_logprob(a))
                .unwrap_or(Ordering::Equal)
        });
        kept.extend(group.into_iter().take(n));
    }
}

/// Mean log probability per generated token; a candidate with no tokens ranks last.
fn mean_logprob(r: &ChoiceResult) -> f64 {
    if r.logprobs.is_empty() {
        return f64::NEG_INFINITY;
    }
    r.logprobs.iter().map(|e| e.logprob as f64).sum::<f64>() / r.logprobs.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::messages::LogprobEntry;
    use crate::text::token_text::TokenText;

    fn candidate(text: &str, logprobs: &[f32]) -> ChoiceResult {
        ChoiceResult {
            text: text.into(),
            logprobs: logprobs
                .iter()
                .map(|&logprob| LogprobEntry {
                    token: TokenText {
                        id: 0,
                        text: String::new(),
                        bytes: Vec::new(),
                    },
                    logprob,
                    rank: 1,
                    top: Vec::new(),
                })
                .collect(),
            ..ChoiceResult::default()
        }
    }

    #[test]
    fn the_best_mean_logprob_wins_per_prompt() {
        let results = || {
            vec![
                // Prompt 0: b's mean (-0.5) beats a's (-1.0) though a's sum (-1.0) beats b's (-1.5).
                candidate("a", &[-1.0]),
                candidate("b", &[-0.5, -0.5, -0.5]),
                candidate("c", &[-2.0, -2.0]),
                // Prompt 1: an empty candidate ranks last; equals keep their order.
                candidate("d", &[]),
                candidate("e", &[-0.1]),
                candidate("f", &[-0.1]),
            ]
        };
        let texts = |r: Vec<ChoiceResult>| r.into_iter().map(|r| r.text).collect::<Vec<_>>();
        assert_eq!(texts(keep_best(results(), 3, 2)), ["b", "a", "e", "f"]);
        assert_eq!(texts(keep_best(results(), 3, 1)), ["b", "e"]);
    }

    #[test]
    fn best_of_is_checked_against_n_and_streaming() {
        assert_eq!(candidates(None, 2, true).unwrap(), None);
        assert_eq!(candidates(Some(2), 2, true).unwrap(), None);
        assert_eq!(candidates(Some(5), 2, false).unwrap(), Some(5));
        for (best_of, n, stream) in [(1, 2, false), (17, 1, false), (3, 1, true)] {
            let e = candidates(Some(best_of), n, stream).unwrap_err();
            assert_eq!(
                e.param.as_deref(),
                Some("best_of"),
                "{best_of} {n} {stream}"
            );
        }
    }
}
