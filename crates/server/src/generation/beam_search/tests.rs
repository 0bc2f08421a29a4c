//! Beam search against exhaustive search on a toy model, and its selection step by hand.

use super::*;

const EOS: u32 = 0;
const VOCAB: u32 = 4;

fn options(width: usize, max_tokens: usize, length_penalty: f64) -> BeamOptions {
    BeamOptions {
        width,
        max_tokens,
        length_penalty,
        ignore_eos: false,
        eos: Some(EOS),
    }
}

/// A toy model: the next token's log-probabilities depend on the last two tokens.
fn toy(context: &[u32]) -> Vec<(u32, f32)> {
    let h = context
        .iter()
        .rev()
        .take(2)
        .fold(7u32, |h, &t| h.wrapping_mul(31).wrapping_add(t));
    let raw: Vec<f32> = (0..VOCAB)
        .map(|t| ((h.wrapping_mul(t + 3) % 17) as f32) / 4.0)
        .collect();
    let norm = raw.iter().map(|x| x.exp()).sum::<f32>().ln();
    let mut out: Vec<(u32, f32)> = (0..VOCAB).map(|t| (t, raw[t as usize] - norm)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

fn run(prompt: &[u32], options: BeamOptions) -> Vec<Beam> {
    let step = |prompts: Vec<Vec<u32>>| async move {
        Ok(prompts.iter().map(|p| toy(p)).collect::<Vec<_>>())
    };
    futures::executor::block_on(search(prompt, options, step)).unwrap()
}

/// Every sequence of up to `max_tokens` tokens (ending at the first EOS), best first.
fn exhaustive(prompt: &[u32], o: BeamOptions) -> Vec<Beam> {
    let mut all = Vec::new();
    let mut frontier = vec![Beam {
        tokens: vec![],
        cum_logprob: 0.0,
        ended: false,
    }];
    for _ in 0..o.max_tokens {
        let mut next = Vec::new();
        for beam in &frontier {
            let context: Vec<u32> = prompt.iter().chain(&beam.tokens).copied().collect();
            for (t, lp) in toy(&context) {
                let mut tokens = beam.tokens.clone();
                tokens.push(t);
                let b = Beam {
                    tokens,
                    cum_logprob: beam.cum_logprob + lp as f64,
                    ended: t == EOS,
                };
                if b.ended {
                    all.push(b)
                } else {
                    next.push(b)
                }
            }
        }
        frontier = next;
    }
    all.extend(frontier);
    o.sort(prompt.len(), &mut all);
    all
}

#[test]
fn a_beam_as_wide_as_every_sequence_finds_the_best_one() {
    for (prompt, penalty) in [(vec![1u32, 2], 1.0), (vec![3], 0.0), (vec![2, 2, 1], 2.0)] {
        // 4 tokens, 3 steps: at most 64 sequences; a beam of 64 keeps them all.
        let wide = options(64, 3, penalty);
        let best = &exhaustive(&prompt, wide)[0];
        let found = &run(&prompt, wide)[0];
        assert_eq!(
            found.tokens, best.tokens,
            "prompt {prompt:?}, penalty {penalty}"
        );
        assert!((found.cum_logprob - best.cum_logprob).abs() < 1e-9);
    }
}

#[test]
fn the_beams_come_best_first_and_a_narrow_beam_never_beats_the_optimum() {
    let prompt = [1u32, 3];
    for width in 1..=4 {
        let o = options(width, 4, 1.0);
        let beams = run(&prompt, o);
        assert!(beams.len() <= width);
        let scores: Vec<f64> = beams.iter().map(|b| o.score(prompt.len(), b)).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        let optimum = o.score(prompt.len(), &exhaustive(&prompt, o)[0]);
        assert!(scores[0] <= optimum + 1e-12);
    }
    // Width 1 is greedy decoding (up to the first EOS).
    let greedy = run(&prompt, options(1, 4, 1.0));
    let mut context = prompt.to_vec();
    let mut tokens = Vec::new();
    for _ in 0..4 {
        let t = toy(&context)[0].0;
        tokens.push(t);
        context.push(t);
        if t == EOS {
            break;
        }
    }
    assert_eq!(greedy[0].tokens, tokens);
}

#[test]
fn an_ending_extension_is_set_aside_and_scored_without_its_eos() {
    let o = options(2, 8, 1.0);
    let live = vec![Beam {
        tokens: vec![5],
        cum_logprob: -1.0,
        ended: false,
    }];
    let mut ended = Vec::new();
    let next = o.advance(
        3,
        &live,
        &[vec![(EOS, -0.1), (6, -0.5), (7, -0.7), (8, -0.9)]],
        &mut ended,
    );
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].tokens, vec![5, EOS]);
    // 3 prompt tokens + 1 (the EOS does not count): -1.1 / 4.
    assert!((o.score(3, &ended[0]) + 1.1 / 4.0).abs() < 1e-6);
    assert_eq!(
        next.iter().map(|b| b.tokens[1]).collect::<Vec<_>>(),
        vec![6, 7]
    );
    let ignoring = BeamOptions {
        ignore_eos: true,
        ..o
    };
    let mut none = Vec::new();
    let next = ignoring.advance(3, &live, &[vec![(EOS, -0.1), (6, -0.5)]], &mut none);
    assert!(none.is_empty() && next[0].tokens == vec![5, EOS]);
}
