//! Log-probabilities for reporting: a token's under the raw row, its rank, and the most
//! likely alternatives (sampled tokens' `logprobs` and the prompt's `prompt_logprobs`).

use crate::request::TokenLogprob;

/// `log(sum(exp(logits)))`, computed stably.
pub fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    max + sum.ln() as f32
}

/// Log-probability of `token` under softmax(`logits`), with the `top_n` most likely tokens.
pub fn token_logprob(logits: &[f32], token: u32, top_n: usize) -> TokenLogprob {
    let lse = log_sum_exp(logits);
    let logprob = logits
        .get(token as usize)
        .map_or(f32::NEG_INFINITY, |&l| l - lse);
    let top = top_n_indices(logits, top_n)
        .into_iter()
        .map(|t| (t, logits[t as usize] - lse))
        .collect();
    TokenLogprob {
        token,
        logprob,
        rank: rank(logits, token),
        top,
    }
}

/// The `n` largest entries' indices, best first (ties: lower index first), in one pass.
fn top_n_indices(values: &[f32], n: usize) -> Vec<u32> {
    let n = n.min(values.len());
    let mut best: Vec<u32> = Vec::with_capacity(n + 1);
    if n == 0 {
        return best;
    }
    for (i, &v) in values.iter().enumerate() {
        if best.len() == n && v <= values[best[n - 1] as usize] {
            continue;
        }
        let at = best.partition_point(|&b| values[b as usize] >= v);
        best.insert(at, i as u32);
        best.truncate(n);
    }
    best
}

/// vLLM's rank of `token`: how many tokens are at least as likely (itself included, so the
/// most likely is 1; ties share the worse rank). 0 for a token outside the row.
fn rank(logits: &[f32], token: u32) -> u32 {
    let Some(&own) = logits.get(token as usize) else {
        return 0;
    };
    logits.iter().filter(|&&l| l >= own).count() as u32
}
