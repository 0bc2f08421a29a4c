//! The linear-attention kernels (kernels/gated_deltanet*.cu) against a naive step-by-step
//! reference in f64 on the host: the causal convolution and the gated delta rule with its
//! gated norm, for two sequences over nine steps (the first fresh, each later one continuing
//! from the state the one before left in the slot, so the state carried is checked too):
//! prompt steps that run the 64-token chunks (whole chunks, a chunk boundary inside a step,
//! a 1- or 5-token sequence beside a long one, several convolution tiles) and short steps that
//! run the token-by-token kernel, in grouped and tiled value-head order, value heads narrower
//! than a warp included.

mod common;

use common::*;
use ferrite_cuda::launchers::{GdnLayer, GdnRecurrenceArgs, GdnSequences, GDN_CHUNK_ROW};

struct Shape {
    nk: usize,
    nv: usize,
    dk: usize,
    dv: usize,
    taps: usize,
    tiled: bool,
}

/// The host reference of one sequence's tokens: conv state [taps - 1][C] and S [nv][dk][dv]
/// carried in `state`; returns the gated, normed outputs [len][nv * dv].
#[allow(clippy::too_many_arguments)]
fn reference(
    s: &Shape,
    state: &mut [f64],
    mixed: &[f32],
    ld: usize,
    taps: &[f32],
    a_rate: &[f32],
    dt_bias: &[f32],
    norm: &[f32],
    eps: f64,
) -> Vec<f64> {
    let (key_dim, value_dim) = (s.nk * s.dk, s.nv * s.dv);
    let c = 2 * key_dim + value_dim;
    let len = mixed.len() / ld;
    let (conv_state, matrices) = state.split_at_mut((s.taps - 1) * c);
    let mut out = Vec::new();
    for t in 0..len {
        let row = &mixed[t * ld..(t + 1) * ld];
        // Convolution over the kept inputs and this one, then SiLU.
        let mut x = vec![0.0f64; c];
        for ch in 0..c {
            let mut sum = taps[ch * s.taps + s.taps - 1] as f64 * row[ch] as f64;
            for j in 0..s.taps - 1 {
                sum += taps[ch * s.taps + j] as f64 * conv_state[j * c + ch];
            }
            x[ch] = sum / (1.0 + (-sum).exp());
        }
        for j in 0..s.taps - 2 {
            for ch in 0..c {
                conv_state[j * c + ch] = conv_state[(j + 1) * c + ch];
            }
        }
        for ch in 0..c {
            conv_state[(s.taps - 2) * c + ch] = row[ch] as f64;
        }
        for h in 0..s.nv {
            let kh = if s.tiled { h % s.nk } else { h / (s.nv / s.nk) };
            let norm_of = |v: &[f64]| 1.0 / (v.iter().map(|a| a * a).sum::<f64>() + 1e-6).sqrt();
            let q = &x[kh * s.dk..(kh + 1) * s.dk];
            let k = &x[key_dim + kh * s.dk..key_dim + (kh + 1) * s.dk];
            let v = &x[2 * key_dim + h * s.dv..2 * key_dim + (h + 1) * s.dv];
            let (qn, kn) = (norm_of(q), norm_of(k));
            let q: Vec<f64> = q.iter().map(|a| a * qn / (s.dk as f64).sqrt()).collect();
            let k: Vec<f64> = k.iter().map(|a| a * kn).collect();
            let b = row[c + value_dim + h] as f64;
            let a = row[c + value_dim + s.nv + h] as f64 + dt_bias[h] as f64;
            let beta = 1.0 / (1.0 + (-b).exp());
            let softplus = if a > 20.0 { a } else { a.exp().ln_1p() };
            let decay = (a_rate[h] as f64 * softplus).exp();
            let st = &mut matrices[h * s.dk * s.dv..(h + 1) * s.dk * s.dv];
            st.iter_mut().for_each(|e| *e *= decay);
            let mut o = vec![0.0f64; s.dv];
            for j in 0..s.dv {
                let mem: f64 = (0..s.dk).map(|i| st[i * s.dv + j] * k[i]).sum();
                let delta = (v[j] - mem) * beta;
                for i in 0..s.dk {
                    st[i * s.dv + j] += k[i] * delta;
                }
                o[j] = (0..s.dk).map(|i| st[i * s.dv + j] * q[i]).sum();
            }
            let inv = 1.0 / (o.iter().map(|a| a * a).sum::<f64>() / s.dv as f64 + eps).sqrt();
            for j in 0..s.dv {
                let z = row[c + h * s.dv + j] as f64;
                out.push(norm[j] as f64 * (o[j] * inv) * (z / (1.0 + (-z).exp())));
            }
        }
    }
    out
}

fn check_shape(s: Shape, seed: u64) {
    let Some(ctx) = gpu("gated_deltanet") else {
        return;
    };
    let mut r = rng(seed);
    let (key_dim, value_dim) = (s.nk * s.dk, s.nv * s.dv);
    let c = 2 * key_dim + value_dim;
    let ld = c + value_dim + 2 * s.nv;
    let taps = random(&mut r, c * s.taps, 0.5);
    let a_rate: Vec<f32> = random(&mut r, s.nv, 0.4).iter().map(|v| v - 0.6).collect();
    let dt_bias = random(&mut r, s.nv, 1.0);
    let norm: Vec<f32> = random(&mut r, s.dv, 0.3).iter().map(|v| v + 1.0).collect();
    let eps = 1e-6f32;
    let slot_len = (s.taps - 1) * c + s.nv * s.dk * s.dv;
    // Two sequences' token counts per step; each step continues from the one before.
    // Sequences of at most GDN_TOKENWISE_MAX_LEN (33) tokens run token by token, longer ones
    // in chunks; [33, 34] straddles the line and [5, 100] puts a short multi-token sequence
    // (a verification of drafts) beside a prompt chunk.
    let steps: [[usize; 2]; 9] = [
        [7, 1],
        [3, 5],
        [1, 1],
        [150, 1],
        [1, 70],
        [33, 34],
        [5, 100],
        [1, 1],
        [64, 65],
    ];
    let mut host_state = vec![vec![0.0f64; slot_len]; 2];
    let state = poisoned::<f32>(&ctx, 2 * slot_len);
    let layer = GdnLayer {
        key_heads: s.nk,
        value_heads: s.nv,
        dk: s.dk,
        dv: s.dv,
        taps: s.taps,
        tiled: s.tiled,
        offset: 0,
    };
    for (step, lens) in steps.iter().enumerate() {
        let n: usize = lens.iter().sum();
        let mixed = random(&mut r, n * ld, 1.5);
        let rows = [0i32, lens[0] as i32];
        let (row_d, len_d) = (
            dev(&ctx, &rows),
            dev(&ctx, &[lens[0] as i32, lens[1] as i32]),
        );
        let (slot_d, fresh_d) = (dev(&ctx, &[0i32, 1]), dev(&ctx, &[i32::from(step == 0); 2]));
        let seqs = GdnSequences {
            row: row_d.ptr(),
            len: len_d.ptr(),
            slot: slot_d.ptr(),
            fresh: fresh_d.ptr(),
            count: 2,
            tokens: n,
            max_len: lens[0].max(lens[1]),
            state: state.ptr(),
            slot_stride: slot_len,
        };
        let (mixed_d, taps_d) = (dev(&ctx, &mixed), dev(&ctx, &taps));
        let (a_d, dt_d, norm_d) = (dev(&ctx, &a_rate), dev(&ctx, &dt_bias), dev(&ctx, &norm));
        let conv = poisoned::<f32>(&ctx, n * c);
        let out = poisoned::<u16>(&ctx, n * value_dim);
        let chunk = poisoned::<f32>(&ctx, n * s.nv * GDN_CHUNK_ROW);
        ctx.kernels
            .gdn_conv(&seqs, &layer, mixed_d.ptr(), ld, taps_d.ptr(), conv.ptr())
            .unwrap();
        let args = GdnRecurrenceArgs {
            conv: conv.ptr(),
            mixed: mixed_d.ptr(),
            ld,
            z_col: c,
            b_col: c + value_dim,
            a_col: c + value_dim + s.nv,
            decay_rate: a_d.ptr(),
            dt_bias: dt_d.ptr(),
            norm: norm_d.ptr(),
            out: out.ptr(),
            chunk: chunk.ptr(),
            eps,
        };
        ctx.kernels.gdn_delta_rule(&seqs, &layer, &args).unwrap();
        let got = read_bf16(&ctx, &out, n * value_dim);
        let mut want = Vec::new();
        for (q, &len) in lens.iter().enumerate() {
            let first = rows[q] as usize;
            let slice = &mixed[first * ld..(first + len) * ld];
            want.extend(reference(
                &s,
                &mut host_state[q],
                slice,
                ld,
                &taps,
                &a_rate,
                &dt_bias,
                &norm,
                eps as f64,
            ));
        }
        let name = format!(
            "gdn nk={} nv={} dk={} dv={} tiled={} step {step}",
            s.nk, s.nv, s.dk, s.dv, s.tiled
        );
        // bf16 outputs: one rounding of values of about 1.
        check(&name, &got, &want, 1e-2);
        let got_state = read_f32(&ctx, &state, 2 * slot_len);
        let want_state: Vec<f64> = host_state.iter().flatten().copied().collect();
        check(&format!("{name} state"), &got_state, &want_state, 1e-4);
    }
}

#[test]
fn gated_delta_rule_matches_the_reference_grouped() {
    check_shape(
        Shape {
            nk: 2,
            nv: 4,
            dk: 16,
            dv: 32,
            taps: 4,
            tiled: false,
        },
        11,
    );
}

#[test]
fn gated_delta_rule_matches_the_reference_tiled_and_narrow() {
    check_shape(
        Shape {
            nk: 2,
            nv: 6,
            dk: 16,
            dv: 16,
            taps: 4,
            tiled: true,
        },
        12,
    );
}

#[test]
fn gated_delta_rule_matches_the_reference_at_real_head_sizes() {
    check_shape(
        Shape {
            nk: 2,
            nv: 4,
            dk: 128,
            dv: 128,
            taps: 4,
            tiled: false,
        },
        13,
    );
}
