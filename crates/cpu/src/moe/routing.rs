//! The router's decision for a step: each token's top-k experts and their weights, and the
//! tokens grouped by expert so that every chosen expert runs once over all of its tokens.
//!
//! Per token, in f32 as transformers computes it: softmax over all experts, the k largest
//! probabilities (ties to the lower expert id), optionally divided by their sum
//! (`norm_topk_prob`; Mixtral's softmax over the chosen logits is the same). A token's choice
//! depends on its own logits only; the grouping only decides which rows run together.

use std::ops::Range;

/// One routed (token, expert) pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub expert: usize,
    pub weight: f32,
}

/// A step's routing, reused from step to step (its buffers only grow).
#[derive(Debug, Default)]
pub struct Routing {
    /// Experts per token.
    pub k: usize,
    /// `k` per token, token-major; within a token sorted by expert id, the order in which
    /// their outputs are summed (transformers adds experts in id order too).
    pub choices: Vec<Choice>,
    /// `(expert, rows)`: the rows of the grouped order that expert `expert` runs over, for the
    /// experts chosen at least once, by expert id.
    pub groups: Vec<(usize, Range<usize>)>,
    /// Grouped row -> token.
    pub token_of_row: Vec<usize>,
    /// `choices[i]` -> its grouped row.
    pub row_of_choice: Vec<usize>,
    /// Scratch: one token's probabilities, and the choices in grouped order.
    probs: Vec<f32>,
    order: Vec<usize>,
}

impl Routing {
    /// Routes `n` tokens from their router logits (`[n, experts]`).
    pub fn route(&mut self, logits: &[f32], n: usize, experts: usize, k: usize, normalize: bool) {
        self.k = k;
        self.choices.clear();
        for row in logits[..n * experts].chunks_exact(experts) {
            top_k(row, k, normalize, &mut self.probs, &mut self.choices);
        }
        self.group();
    }

    /// Sorts the choices by expert (stable: tokens stay in order within an expert).
    fn group(&mut self) {
        let total = self.choices.len();
        self.order.clear();
        self.order.extend(0..total);
        let choices = &self.choices;
        self.order.sort_by_key(|&i| choices[i].expert);
        self.groups.clear();
        self.token_of_row.clear();
        self.row_of_choice.clear();
        self.row_of_choice.resize(total, 0);
        for (row, &choice) in self.order.iter().enumerate() {
            let expert = choices[choice].expert;
            match self.groups.last_mut() {
                Some((e, rows)) if *e == expert => rows.end = row + 1,
                _ => self.groups.push((expert, row..row + 1)),
            }
            self.token_of_row.push(choice / self.k);
            self.row_of_choice[choice] = row;
        }
    }

    /// Tokens routed to each expert in this step, added to `counts` (one per expert).
    pub fn add_load(&self, counts: &[std::sync::atomic::AtomicU64]) {
        for (expert, rows) in &self.groups {
            counts[*expert].fetch_add(rows.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Appends one token's `k` choices, sorted by expert id, to `out`.
fn top_k(logits: &[f32], k: usize, normalize: bool, probs: &mut Vec<f32>, out: &mut Vec<Choice>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    probs.clear();
    probs.extend(logits.iter().map(|&l| (l - max).exp()));
    let sum: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    let first = out.len();
    // k is small (2 to 8): repeated selection of the largest remaining probability.
    for _ in 0..k {
        let mut best: Option<usize> = None;
        for (e, &p) in probs.iter().enumerate() {
            let taken = out[first..].iter().any(|c| c.expert == e);
            if !taken && best.is_none_or(|b| p > probs[b]) {
                best = Some(e);
            }
        }
        let expert = best.unwrap_or(0);
        out.push(Choice {
            expert,
            weight: probs[expert],
        });
    }
    let chosen = &mut out[first..];
    if normalize {
        // Summed in rank order (largest first), as torch sums the top-k values.
        let total: f32 = chosen.iter().map(|c| c.weight).sum();
        chosen.iter_mut().for_each(|c| c.weight /= total);
    }
    chosen.sort_by_key(|c| c.expert);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_k_most_probable_and_renormalises() {
        let mut routing = Routing::default();
        // token 0 prefers experts 2 then 0; token 1 prefers 1 then 2.
        let logits = [1.0, -1.0, 2.0, 0.0, /* */ 0.0, 3.0, 1.0, -2.0];
        routing.route(&logits, 2, 4, 2, true);
        let experts: Vec<usize> = routing.choices.iter().map(|c| c.expert).collect();
        assert_eq!(experts, [0, 2, 1, 2]);
        let w = |i: usize| routing.choices[i].weight;
        // softmax over the two chosen logits: e^2 / (e^2 + e^1) for expert 2 of token 0.
        let e = std::f32::consts::E;
        assert!((w(1) - e * e / (e * e + e)).abs() < 1e-6);
        assert!((w(0) + w(1) - 1.0).abs() < 1e-6);
        // Grouped by expert, tokens in order within a group.
        let groups: Vec<(usize, usize)> =
            routing.groups.iter().map(|(e, r)| (*e, r.len())).collect();
        assert_eq!(groups, [(0, 1), (1, 1), (2, 2)]);
        assert_eq!(routing.token_of_row, [0, 1, 0, 1]);
        for (i, &row) in routing.row_of_choice.iter().enumerate() {
            assert_eq!(routing.token_of_row[row], i / 2);
        }
    }

    #[test]
    fn without_normalisation_the_weights_are_the_full_softmax_probabilities() {
        let mut routing = Routing::default();
        let logits = [0.0f32, 1.0, 2.0];
        routing.route(&logits, 1, 3, 1, false);
        let sum: f32 = logits.iter().map(|l| l.exp()).sum();
        assert_eq!(routing.choices[0].expert, 2);
        assert!((routing.choices[0].weight - 2f32.exp() / sum).abs() < 1e-6);
    }

    #[test]
    fn ties_go_to_the_lower_expert() {
        let mut routing = Routing::default();
        routing.route(&[0.5, 0.5, 0.5], 1, 3, 2, true);
        let experts: Vec<usize> = routing.choices.iter().map(|c| c.expert).collect();
        assert_eq!(experts, [0, 1]);
    }
}
