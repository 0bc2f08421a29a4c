//! The sampling kernels (kernels/sampling.cu) against independent oracles: greedy rows against
//! the host argmax (ties to the lowest id), sampled rows against the distribution they must
//! follow, softmax(logits / T) renormalised over the tokens the filter keeps, by a chi-square
//! test over thousands of draws. Vocabularies are not multiples of the kernel's chunk and put
//! the likely tokens in different chunks, so the chunk-combining path is what is tested.
//! On a machine without a GPU each test prints SKIPPED.

mod common;

use common::*;
use ferrite_cuda::launchers::{Kernels, SampleArgs, SampleParams};

/// Samples logits rows `rows` (indices into `logits`, `vocab` wide) with `params`.
fn sample(
    ctx: &Ctx,
    logits: &[f32],
    vocab: usize,
    rows: &[i32],
    params: &[SampleParams],
) -> Vec<i32> {
    let n = rows.len();
    let (ld, rd, pd) = (dev(ctx, logits), dev(ctx, rows), dev(ctx, params));
    let tokens = poisoned::<i32>(ctx, n);
    let partials = poisoned::<u8>(ctx, Kernels::sample_partials_len(n, vocab));
    ctx.kernels
        .sample(&SampleArgs {
            logits: ld.ptr(),
            rows: rd.ptr(),
            params: pd.ptr(),
            tokens: tokens.ptr(),
            partials: partials.ptr(),
            vocab,
            n,
        })
        .unwrap();
    read_i32(ctx, &tokens, n)
}

#[test]
fn greedy_rows_take_the_first_maximum() {
    let Some(ctx) = gpu("sampling greedy") else {
        return;
    };
    let mut r = rng(11);
    let (vocab, num_rows) = (150_001usize, 5usize);
    let mut logits = random(&mut r, num_rows * vocab, 8.0);
    // Row 1: the maximum twice, in different chunks; row 2: twice in one chunk; row 4: in the
    // ragged last chunk.
    for (row, ids) in [
        (1usize, [140_000usize, 9_000]),
        (2, [70_001, 70_000]),
        (4, [150_000, 150_000]),
    ] {
        for id in ids {
            logits[row * vocab + id] = 9.0;
        }
    }
    let rows: Vec<i32> = vec![3, 0, 1, 4, 2];
    let params: Vec<SampleParams> = rows
        .iter()
        .map(|_| SampleParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            ..Default::default()
        })
        .collect();
    let got = sample(&ctx, &logits, vocab, &rows, &params);
    let want: Vec<i32> = rows
        .iter()
        .map(|&row| {
            let row = row as usize;
            ferrite_engine::sampler::argmax(&logits[row * vocab..(row + 1) * vocab]) as i32
        })
        .collect();
    println!("greedy: got {got:?}, want {want:?}");
    assert_eq!(got, want);
    assert_eq!(got[2], 9_000, "a tie goes to the lowest id");
    assert_eq!(got[4], 70_000, "a tie goes to the lowest id");
}

/// Likely tokens (id, logit) of the distribution tests; every other token sits at -40, so
/// together they weigh less than 1e-12.
const LIKELY: [(usize, f32); 6] = [
    (5, 2.0),
    (4_100, 1.5),
    (4_101, 1.0),
    (8_191, 0.5),
    (8_192, 0.0),
    (8_999, -0.5),
];
const VOCAB: usize = 9_001;

/// Draws `draws` tokens with `params` (counter varied per draw) and returns the chi-square
/// statistic of their counts against `expected` (probabilities over LIKELY's ids; a token
/// outside LIKELY or with probability 0 fails the test outright).
fn chi_square(ctx: &Ctx, params: SampleParams, expected: &[f64], draws: usize) -> f64 {
    let mut logits = vec![-40.0f32; VOCAB];
    for &(id, l) in &LIKELY {
        logits[id] = l;
    }
    let mut counts = vec![0usize; LIKELY.len()];
    let batch = 2_000;
    for start in (0..draws).step_by(batch) {
        let n = batch.min(draws - start);
        let rows = vec![0i32; n];
        let params: Vec<SampleParams> = (0..n)
            .map(|i| SampleParams {
                counter: (start + i) as u64,
                ..params
            })
            .collect();
        let got = sample(ctx, &logits, VOCAB, &rows, &params);
        // The same (seed, counter) draws the same token: the kernel is a pure function.
        assert_eq!(got, sample(ctx, &logits, VOCAB, &rows, &params));
        for t in got {
            let slot = LIKELY.iter().position(|&(id, _)| id as i32 == t);
            let slot = slot.unwrap_or_else(|| panic!("drew token {t}, which has no weight"));
            assert!(
                expected[slot] > 0.0,
                "drew token {t}, which the filter removes"
            );
            counts[slot] += 1;
        }
    }
    let stat: f64 = counts
        .iter()
        .zip(expected)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = p * draws as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum();
    println!(
        "counts {counts:?} expected {:?}: chi-square {stat:.2}",
        expected
            .iter()
            .map(|p| (p * draws as f64).round())
            .collect::<Vec<_>>()
    );
    stat
}

/// softmax(logit / t) over LIKELY, restricted to the first `keep` tokens (LIKELY is sorted
/// best first) and renormalised.
fn softmax_top(t: f64, keep: usize) -> Vec<f64> {
    let w: Vec<f64> = LIKELY
        .iter()
        .enumerate()
        .map(|(i, &(_, l))| if i < keep { (l as f64 / t).exp() } else { 0.0 })
        .collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

// Chi-square critical values at p = 0.001: 5 degrees of freedom 20.5, 2 of them 13.8. The
// draws are seeded, so each test is deterministic; a wrong rule (say, ignoring the
// temperature: T = 1 instead of 0.7 shifts the top token from 0.52 to 0.43) moves the
// statistic into the hundreds at these sample sizes.
const DRAWS: usize = 20_000;

#[test]
fn temperature_draws_follow_the_softmax() {
    let Some(ctx) = gpu("sampling temperature") else {
        return;
    };
    let params = SampleParams {
        temperature: 0.7,
        top_p: 1.0,
        min_p: 0.0,
        top_k: 0,
        seed: 0x5eed,
        counter: 0,
    };
    let stat = chi_square(&ctx, params, &softmax_top(0.7, LIKELY.len()), DRAWS);
    assert!(
        stat < 20.5,
        "chi-square {stat:.1} >= 20.5 (5 dof, p = 0.001)"
    );
    // The oracle has the power to see a wrong temperature.
    let wrong = chi_square(&ctx, params, &softmax_top(1.0, LIKELY.len()), DRAWS);
    assert!(
        wrong > 20.5,
        "the test cannot tell T = 0.7 from T = 1 ({wrong:.1})"
    );
}

#[test]
fn top_k_and_top_p_draws_follow_the_renormalised_softmax() {
    let Some(ctx) = gpu("sampling top-k/top-p") else {
        return;
    };
    let base = SampleParams {
        temperature: 1.0,
        top_p: 1.0,
        min_p: 0.0,
        top_k: 0,
        seed: 7,
        counter: 0,
    };
    let top_k = SampleParams { top_k: 3, ..base };
    let stat = chi_square(&ctx, top_k, &softmax_top(1.0, 3), DRAWS);
    assert!(stat < 13.8, "top-k 3: chi-square {stat:.1} >= 13.8 (2 dof)");

    // top-p 0.8 keeps the smallest best-first set whose mass reaches 0.8 of the total.
    let full = softmax_top(1.0, LIKELY.len());
    let mut keep = 0;
    let mut mass = 0.0;
    while mass < 0.8 {
        mass += full[keep];
        keep += 1;
    }
    let top_p = SampleParams { top_p: 0.8, ..base };
    let stat = chi_square(&ctx, top_p, &softmax_top(1.0, keep), DRAWS);
    assert!(
        stat < 16.3,
        "top-p 0.8 (keeps {keep}): chi-square {stat:.1} >= 16.3 (<= 3 dof)"
    );
}

/// Structured outputs on the device: `apply_token_mask` then the sampling kernels never give
/// a token the mask forbids. Each row allows a random tenth of a 150,001-token vocabulary (its
/// unmasked argmax always forbidden); greedy rows take the argmax over the allowed tokens (the
/// host oracle), and 2,000 temperature / top-k / top-p / min-p draws land on allowed tokens only.
#[test]
fn masked_rows_only_ever_give_allowed_tokens() {
    let Some(ctx) = gpu("sampling masked") else {
        return;
    };
    let mut r = rng(23);
    let (vocab, num_rows) = (150_001usize, 4usize);
    let words = vocab.div_ceil(32);
    let logits = random(&mut r, num_rows * vocab, 8.0);
    let mut masks = vec![0u32; num_rows * words];
    let mut allowed = vec![vec![false; vocab]; num_rows];
    for row in 0..num_rows {
        let top = ferrite_engine::sampler::argmax(&logits[row * vocab..(row + 1) * vocab]);
        for t in 0..vocab {
            let keep = random(&mut r, 1, 1.0)[0] > 0.8 && t != top as usize;
            if keep {
                allowed[row][t] = true;
                masks[row * words + t / 32] |= 1 << (t % 32);
            }
        }
    }
    let rows: Vec<i32> = (0..num_rows as i32).collect();
    let mask_params = |temperature, top_k, top_p, min_p, counter| SampleParams {
        temperature,
        top_k,
        top_p,
        min_p,
        seed: 99,
        counter,
    };
    let mut draws = 0;
    for (t, k, p, m) in [
        (0.0, 0, 1.0, 0.0),
        (1.0, 0, 1.0, 0.0),
        (0.7, 50, 1.0, 0.0),
        (1.3, 0, 0.9, 0.0),
        (1.0, 0, 1.0, 0.05),
    ] {
        for counter in 0..(if t == 0.0 { 1 } else { 100 }) {
            // The mask writes -inf into the logits: a fresh copy each launch.
            let (ld, rd, md) = (dev(&ctx, &logits), dev(&ctx, &rows), dev(&ctx, &masks));
            ctx.kernels
                .apply_token_mask(ld.ptr(), rd.ptr(), md.ptr(), vocab, num_rows)
                .unwrap();
            let masked = read_f32(&ctx, &ld, num_rows * vocab);
            let params: Vec<SampleParams> = rows
                .iter()
                .map(|_| mask_params(t, k, p, m, counter))
                .collect();
            let got = sample(&ctx, &masked, vocab, &rows, &params);
            for (row, &token) in got.iter().enumerate() {
                assert!(
                    allowed[row][token as usize],
                    "row {row} (T {t}, top-k {k}, top-p {p}, min-p {m}): token {token} is masked"
                );
                if t == 0.0 {
                    let best = (0..vocab)
                        .filter(|&i| allowed[row][i])
                        .max_by(|&a, &b| {
                            let (x, y) = (logits[row * vocab + a], logits[row * vocab + b]);
                            x.total_cmp(&y).then(b.cmp(&a))
                        })
                        .unwrap();
                    assert_eq!(
                        token as usize, best,
                        "row {row}: greedy over the allowed tokens"
                    );
                }
                draws += 1;
            }
        }
    }
    println!("masked sampling: {draws} draws, every one allowed by its row's mask");
}
