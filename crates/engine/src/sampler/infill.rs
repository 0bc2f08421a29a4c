//! llama.cpp's `infill` sampler, the last link of the chain its editor plugins ask for
//! (`samplers: ["top_k", "top_p", "infill"]`): on the candidates the other filters left, it
//! ends the completion when ending is likely enough, merges candidates whose text is a prefix
//! of another's into the more likely of the two (a completion should not hesitate between
//! `for` and `format`), and keeps only clear winners.
//!
//! Steps, on the candidates' probabilities `p` (renormalised after each cut):
//! 1. If `3 · p(end) · n > p(text)` (n candidates), only the end tokens stay.
//! 2. In order of `p`, a candidate whose text is a prefix of another's gives its mass to the
//!    more likely of the pair and leaves.
//! 3. Text tokens under `p = 0.2` leave (end tokens stay); if no text token is left, the
//!    answer is the end-of-text token alone.
//! 4. Text tokens under `1 / (k + 1)` leave, `k` the text tokens step 3 kept.
//!
//! The engine knows tokens by id only: the server gives each token's text as bytes
//! (`token_pieces`, special tokens empty) once, shared by every request that asks.

use crate::distribution::Candidate;
use crate::token_pieces::TokenPieces;

/// Applies the sampler to `candidates` (weights unnormalised). `end_ids`: the tokens that end
/// the sequence; `end_of_text`: the answer when no text token is left (`None`: the best
/// candidate stays instead).
pub(crate) fn apply(
    candidates: &mut Vec<Candidate>,
    pieces: &TokenPieces,
    end_ids: &[u32],
    end_of_text: Option<u32>,
) {
    let is_end = |c: &Candidate| end_ids.contains(&c.token);
    let total: f64 = candidates.iter().map(|c| c.weight).sum();
    if candidates.is_empty() || total <= 0.0 {
        return;
    }
    let p_end: f64 = candidates
        .iter()
        .filter(|c| is_end(c))
        .map(|c| c.weight)
        .sum();
    let p_text = total - p_end;
    if 3.0 * p_end * candidates.len() as f64 > p_text {
        candidates.retain(is_end);
        return;
    }
    candidates.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.token.cmp(&b.token)));
    for i0 in 0..candidates.len() {
        for i1 in 0..candidates.len() {
            if candidates[i0].weight == 0.0 {
                break;
            }
            if i0 == i1 || candidates[i1].weight == 0.0 {
                continue;
            }
            let (a, b) = (
                pieces.get(candidates[i0].token),
                pieces.get(candidates[i1].token),
            );
            if !a.is_empty() && b.starts_with(a) {
                let (dst, src) = match candidates[i1].weight > candidates[i0].weight {
                    true => (i1, i0),
                    false => (i0, i1),
                };
                candidates[dst].weight += candidates[src].weight;
                candidates[src].weight = 0.0;
            }
        }
    }
    let best = candidates
        .iter()
        .max_by(|a, b| a.weight.total_cmp(&b.weight))
        .copied();
    let kept_text = keep_above(candidates, 0.2, &is_end);
    if kept_text == 0 {
        let only = match end_of_text {
            Some(token) => Some(Candidate {
                token,
                logit: 1.0,
                weight: 1.0,
            }),
            None => best,
        };
        *candidates = only.into_iter().collect();
        return;
    }
    keep_above(candidates, 1.0 / (kept_text + 1) as f64, &is_end);
}

/// Drops text candidates whose share of the mass is under `threshold` (end tokens stay);
/// returns how many text candidates are left.
fn keep_above(
    candidates: &mut Vec<Candidate>,
    threshold: f64,
    is_end: &dyn Fn(&Candidate) -> bool,
) -> usize {
    let total: f64 = candidates.iter().map(|c| c.weight).sum();
    candidates.retain(|c| is_end(c) || (total > 0.0 && c.weight / total >= threshold));
    candidates.iter().filter(|c| !is_end(c)).count()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::token_pieces::InfillSampling;

    fn pieces() -> TokenPieces {
        // 0: end (special, empty), 1 "for", 2 "format", 3 "x", 4 "y", 5 "z"
        let texts: [&[u8]; 6] = [b"", b"for", b"format", b"x", b"y", b"z"];
        TokenPieces::new(texts.iter().map(|t| t.to_vec()).collect())
    }

    fn cands(weights: &[(u32, f64)]) -> Vec<Candidate> {
        weights
            .iter()
            .map(|&(token, weight)| Candidate {
                token,
                logit: 0.0,
                weight,
            })
            .collect()
    }

    fn tokens(c: &[Candidate]) -> Vec<(u32, f64)> {
        let total: f64 = c.iter().map(|c| c.weight).sum();
        c.iter().map(|c| (c.token, c.weight / total)).collect()
    }

    #[test]
    fn a_request_that_asks_gets_it_after_the_other_filters() {
        use crate::request::SamplingParams;
        use crate::sampler::Sampler;
        // p = softmax(ln 0.3, ln 0.5, ln 0.2) over "for", "format", "x"; the others -inf.
        let mut logits = vec![f32::NEG_INFINITY; 6];
        logits[1] = 0.3f32.ln();
        logits[2] = 0.5f32.ln();
        logits[3] = 0.2f32.ln();
        let mut params = SamplingParams {
            infill: Some(InfillSampling(Arc::new(pieces()))),
            ..SamplingParams::default()
        };
        let mut sampler = Sampler::new(&[0]);
        let support = sampler.support(&logits, &params, &[], &[]);
        assert_eq!(support.iter().map(|c| c.token).collect::<Vec<_>>(), vec![2]);
        params.infill = None;
        assert_eq!(sampler.support(&logits, &params, &[], &[]).len(), 3);
    }

    #[test]
    fn a_likely_end_leaves_only_the_end_tokens() {
        // p(end) = 0.1, 4 candidates: 3 * 0.1 * 4 = 1.2 > 0.9.
        let mut c = cands(&[(0, 0.1), (3, 0.5), (4, 0.3), (5, 0.1)]);
        apply(&mut c, &pieces(), &[0], Some(0));
        assert_eq!(tokens(&c), vec![(0, 1.0)]);
    }

    #[test]
    fn a_prefix_gives_its_mass_to_the_likelier_token_then_weak_ones_leave() {
        // "for" (0.3) is a prefix of "format" (0.5): format gets 0.8; x (0.2) stays over 0.2
        // at step 3 (2 text tokens), then leaves under 1/3 at step 4.
        let mut c = cands(&[(1, 0.3), (2, 0.5), (3, 0.2)]);
        apply(&mut c, &pieces(), &[0], Some(0));
        assert_eq!(tokens(&c), vec![(2, 1.0)]);
    }

    #[test]
    fn with_no_clear_text_token_the_answer_is_the_end_of_text() {
        // for + format merge into format (0.43); x, y, z (0.19 each) leave at 0.2.
        let mut c = cands(&[(3, 0.19), (4, 0.19), (5, 0.19), (1, 0.19), (2, 0.24)]);
        apply(&mut c, &pieces(), &[0], Some(0));
        assert_eq!(tokens(&c), vec![(2, 1.0)]);
        let texts: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i as u8]).collect();
        let mut c = cands(&[(1, 0.19), (2, 0.19), (3, 0.19), (4, 0.19), (5, 0.24)]);
        apply(&mut c, &TokenPieces::new(texts), &[0], Some(0));
        assert_eq!(tokens(&c), vec![(5, 1.0)]);
        // Six unrelated tokens of 1/6 each: none reaches 0.2.
        let texts: Vec<Vec<u8>> = (0..7).map(|i| vec![b'a' + i as u8]).collect();
        let even: Vec<(u32, f64)> = (1..=6).map(|t| (t, 1.0)).collect();
        let mut c = cands(&even);
        apply(&mut c, &TokenPieces::new(texts.clone()), &[0], Some(0));
        assert_eq!(tokens(&c), vec![(0, 1.0)]);
        // Without an end-of-text token, the best candidate stays.
        let mut c = cands(&even);
        apply(&mut c, &TokenPieces::new(texts), &[], None);
        assert_eq!(c.len(), 1);
    }
}
