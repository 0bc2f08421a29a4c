//! Gated DeltaNet linear attention (qwen3_next, qwen3_5) on the CPU, in f32: the layer's
//! forward pass over a step's tokens, continuing each sequence's recurrent state (kept in
//! `recurrent_state::StateCache`, which also says when a step must first be rewound).
//!
//! Every token runs the recurrence (`plan::LinearAttentionSpec` has the formulas) in order,
//! prompt and decode alike, so a sequence's outputs do not depend on how its prompt was
//! chunked or what else shares the step.

use ferrite_engine::{BackendError, SeqBatch};
use ferrite_model::plan::LinearAttentionSpec;
use rayon::prelude::*;

use crate::kernels::matmul::{matmul, matmul_group, MatmulJob};
use crate::model_weights::LinearAttention;
use crate::recurrent_state::{LayerInputs, StateCache};
use crate::simd::Isa;

/// Scratch of the linear-attention layers, reused from step to step.
#[derive(Default)]
pub struct LinearScratch {
    /// The projections of every token: q, k, v (before and after the convolution), z, b, a.
    mixed: Vec<f32>,
    conv_out: Vec<f32>,
    z: Vec<f32>,
    b: Vec<f32>,
    a: Vec<f32>,
    /// The recurrence's output per token and value head, normed and gated in place.
    core: Vec<f32>,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// One linear-attention layer over the step's tokens: `normed` is `[n, hidden]` (the tokens of
/// `batch` stacked in order), `out` gets `[n, hidden]`.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    isa: Isa,
    w: &LinearAttention,
    layer: usize,
    state: &mut StateCache,
    batch: &[SeqBatch<'_>],
    normed: &[f32],
    n: usize,
    eps: f32,
    scratch: &mut LinearScratch,
    out: &mut [f32],
) -> Result<(), BackendError> {
    let s = &w.spec;
    let (channels, value_dim, heads) = (s.conv_channels(), s.value_dim(), s.num_value_heads);
    let mixed = sized(&mut scratch.mixed, n * channels);
    let z = sized(&mut scratch.z, n * value_dim);
    let b = sized(&mut scratch.b, n * heads);
    let a = sized(&mut scratch.a, n * heads);
    matmul_group(
        isa,
        normed,
        n,
        &mut [
            MatmulJob {
                matrix: &w.qkv,
                out: mixed,
            },
            MatmulJob {
                matrix: &w.gate,
                out: z,
            },
            MatmulJob {
                matrix: &w.beta,
                out: b,
            },
            MatmulJob {
                matrix: &w.alpha,
                out: a,
            },
        ],
    );
    let conv_out = sized(&mut scratch.conv_out, n * channels);
    let core = sized(&mut scratch.core, n * value_dim);
    let mut first = 0;
    for (i, seq) in batch.iter().enumerate() {
        let len = seq.tokens.len();
        if seq.state_slot.is_none() {
            return Err(BackendError(
                "a linear-attention layer needs the sequence's state slot".into(),
            ));
        }
        let rows = first..first + len;
        let slot = state.layer_slot(layer, i, s.state_len());
        let layer_state = slot.state;
        if seq.start_pos == 0 {
            layer_state.fill(0.0);
        }
        if let Some((kept, inputs)) = slot.replay {
            layer_state.copy_from_slice(&inputs.state);
            replay(w, layer_state, inputs, kept);
        }
        if let Some(record) = slot.record {
            *record = LayerInputs {
                state: layer_state.to_vec(),
                mixed: mixed[rows.start * channels..rows.end * channels].to_vec(),
                b: b[rows.start * heads..rows.end * heads].to_vec(),
                a: a[rows.start * heads..rows.end * heads].to_vec(),
            };
        }
        let (conv_state, matrices) = layer_state.split_at_mut((s.conv_kernel - 1) * channels);
        convolve(
            s,
            &w.conv,
            conv_state,
            &mixed[rows.start * channels..rows.end * channels],
            &mut conv_out[rows.start * channels..rows.end * channels],
        );
        recur(
            w,
            matrices,
            &mut conv_out[rows.start * channels..rows.end * channels],
            &b[rows.start * heads..rows.end * heads],
            &a[rows.start * heads..rows.end * heads],
            &mut core[rows.start * value_dim..rows.end * value_dim],
        );
        first += len;
    }
    gated_norm(&w.norm, eps, core, z);
    matmul(isa, core, n, &w.out, out);
    Ok(())
}

/// Takes the first `kept` tokens of a recorded step back into `layer_state` (the state before
/// that step): the convolution and the recurrence over their recorded inputs, outputs dropped.
fn replay(w: &LinearAttention, layer_state: &mut [f32], inputs: &LayerInputs, kept: usize) {
    let s = &w.spec;
    let (channels, heads) = (s.conv_channels(), s.num_value_heads);
    let (conv_state, matrices) = layer_state.split_at_mut((s.conv_kernel - 1) * channels);
    let mut qkv = vec![0.0f32; kept * channels];
    convolve(
        s,
        &w.conv,
        conv_state,
        &inputs.mixed[..kept * channels],
        &mut qkv,
    );
    let mut out = vec![0.0f32; kept * s.value_dim()];
    recur(
        w,
        matrices,
        &mut qkv,
        &inputs.b[..kept * heads],
        &inputs.a[..kept * heads],
        &mut out,
    );
}

/// The causal depthwise convolution of one sequence's new tokens (`x`, `[len, channels]`)
/// over its last `taps - 1` inputs (`conv_state`, updated to the newest), then SiLU.
fn convolve(
    s: &LinearAttentionSpec,
    taps: &[f32],
    conv_state: &mut [f32],
    x: &[f32],
    y: &mut [f32],
) {
    let (channels, k) = (s.conv_channels(), s.conv_kernel);
    let len = x.len() / channels;
    // The window of inputs: the kept ones, then the new ones.
    let window: Vec<f32> = conv_state.iter().chain(x).copied().collect();
    y.par_chunks_mut(channels)
        .enumerate()
        .for_each(|(t, y_row)| {
            // Input row t + j of the window is tap j of output t (oldest tap first).
            for (c, y) in y_row.iter_mut().enumerate() {
                let mut sum = 0.0f32;
                for j in 0..k {
                    sum += taps[c * k + j] * window[(t + j) * channels + c];
                }
                *y = sum / (1.0 + (-sum).exp());
            }
        });
    // The newest `taps - 1` inputs: the window's last rows.
    conv_state.copy_from_slice(&window[len * channels..]);
}

/// The gated delta rule of one sequence's tokens, every value head in parallel: `qkv` holds
/// each token's convolved q, k, v (q and k normalised here), `b` and `a` its beta and decay
/// inputs per head; `out` gets `[len, value_dim]`.
fn recur(
    w: &LinearAttention,
    matrices: &mut [f32],
    qkv: &mut [f32],
    b: &[f32],
    a: &[f32],
    out: &mut [f32],
) {
    let s = &w.spec;
    let (dk, dv, heads) = (s.key_head_dim, s.value_head_dim, s.num_value_heads);
    let (key_dim, value_dim, channels) = (s.key_dim(), s.value_dim(), s.conv_channels());
    let len = b.len() / heads;
    // L2-normalise q and k per key head, as transformers' l2norm: x * rsqrt(sum(x²) + 1e-6);
    // q is then divided by sqrt(key_head_dim).
    let q_scale = (dk as f32).sqrt();
    qkv.par_chunks_mut(channels).for_each(|row| {
        for (i, head) in row[..2 * key_dim].chunks_exact_mut(dk).enumerate() {
            let inv = 1.0 / (head.iter().map(|v| v * v).sum::<f32>() + 1e-6).sqrt();
            head.iter_mut().for_each(|v| *v *= inv);
            if i < s.num_key_heads {
                head.iter_mut().for_each(|v| *v /= q_scale);
            }
        }
    });
    let qkv: &[f32] = qkv;
    let outputs: Vec<(usize, Vec<f32>)> = matrices
        .par_chunks_mut(dk * dv)
        .enumerate()
        .map(|(h, state)| {
            let key_head = s.key_head_of(h);
            let mut head_out = vec![0.0f32; len * dv];
            let mut kv_mem = vec![0.0f32; dv];
            for t in 0..len {
                let row = &qkv[t * channels..(t + 1) * channels];
                let q = &row[key_head * dk..(key_head + 1) * dk];
                let k = &row[key_dim + key_head * dk..key_dim + (key_head + 1) * dk];
                let v = &row[2 * key_dim + h * dv..2 * key_dim + (h + 1) * dv];
                let beta = 1.0 / (1.0 + (-b[t * heads + h]).exp());
                let g = w.a[h] * softplus(a[t * heads + h] + w.dt_bias[h]);
                let decay = g.exp();
                state.iter_mut().for_each(|x| *x *= decay);
                kv_mem.fill(0.0);
                for (i, &ki) in k.iter().enumerate() {
                    for (m, &sij) in kv_mem.iter_mut().zip(&state[i * dv..(i + 1) * dv]) {
                        *m += sij * ki;
                    }
                }
                for (i, &ki) in k.iter().enumerate() {
                    let row = &mut state[i * dv..(i + 1) * dv];
                    for ((sij, &vj), &mj) in row.iter_mut().zip(v).zip(&kv_mem) {
                        *sij += ki * ((vj - mj) * beta);
                    }
                }
                let o = &mut head_out[t * dv..(t + 1) * dv];
                for (i, &qi) in q.iter().enumerate() {
                    for (oj, &sij) in o.iter_mut().zip(&state[i * dv..(i + 1) * dv]) {
                        *oj += sij * qi;
                    }
                }
            }
            (h, head_out)
        })
        .collect();
    for (h, head_out) in outputs {
        for (t, o) in head_out.chunks_exact(dv).enumerate() {
            out[t * value_dim + h * dv..t * value_dim + (h + 1) * dv].copy_from_slice(o);
        }
    }
}

/// PyTorch's softplus: `log(1 + e^x)`, and `x` itself above 20.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// Per value head of every token: `rms_norm(o) · w · silu(z)` in place (transformers'
/// RMSNormGated: the norm first, then the gate).
fn gated_norm(weight: &[f32], eps: f32, core: &mut [f32], z: &[f32]) {
    let dv = weight.len();
    core.par_chunks_mut(dv)
        .zip(z.par_chunks(dv))
        .for_each(|(o, z)| {
            let mean_square = o.iter().map(|v| v * v).sum::<f32>() / dv as f32;
            let inv = 1.0 / (mean_square + eps).sqrt();
            for ((o, &w), &z) in o.iter_mut().zip(weight).zip(z) {
                let gate = z / (1.0 + (-z).exp());
                *o = w * (*o * inv) * gate;
            }
        });
}
