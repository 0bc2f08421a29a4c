//! The mixture-of-experts MLP of one layer over a step's tokens.
//!
//! 1. router logits `x · routerᵀ` (f32) and the routing (`routing.rs`);
//! 2. each token's row copied once per chosen expert, grouped by expert;
//! 3. gate/up of every chosen expert over its rows in one parallel region, threads spread over
//!    (expert, weight rows) tasks, then the activation, then down the same way: each chosen
//!    expert's weights are read once per step, whatever the number of its tokens;
//! 4. per token, the weighted expert outputs summed in expert-id order (plus qwen2_moe's gated
//!    shared expert).
//!
//! Buffers are sized by routed rows (tokens x k), never experts x tokens. Every output element
//! is a canonical dot product (see `kernels::matmul`) and every token's sum has a fixed order,
//! so a token's output does not depend on which other tokens share its experts.

use ferrite_model::config::Activation;
use rayon::prelude::*;

use super::routing::Routing;
use super::{Expert, MoeWeights};
use crate::kernels::activation::gated;
use crate::kernels::matmul::{matmul, matmul_group, matmul_segments, MatmulJob, SegmentJob};
use crate::kernels::quant_matrix::QuantMatrix;
use crate::simd::Isa;

/// Routed rows per parallel task of the element-wise steps.
const ROWS_PER_TASK: usize = 8;

/// Per-step scratch of the MoE MLPs (reused across layers and steps; only grows).
#[derive(Default)]
pub struct MoeScratch {
    logits: Vec<f32>,
    routing: Routing,
    /// Routed rows: inputs, gate (then activation), up, expert outputs.
    xs: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    ys: Vec<f32>,
    /// The shared expert's gate logit per token, its gate/up and its output.
    shared_score: Vec<f32>,
    shared_gate: Vec<f32>,
    shared_up: Vec<f32>,
    shared_out: Vec<f32>,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// `out = moe(x)` for `n` tokens (`x`, `out`: `[n, hidden]`), routed on `router_x` (`x`
/// itself but for Gemma 4's router, which reads its own norm of the residual). `load`, when
/// given, counts the tokens routed to each expert.
#[allow(clippy::too_many_arguments)]
pub fn moe_mlp(
    isa: Isa,
    moe: &MoeWeights,
    activation: Activation,
    router_x: &[f32],
    x: &[f32],
    n: usize,
    s: &mut MoeScratch,
    out: &mut [f32],
    load: Option<&[std::sync::atomic::AtomicU64]>,
) {
    let hidden = moe.router.cols();
    let (experts, k) = (moe.experts.len(), moe.experts_per_token);
    let inter = moe.experts.first().map_or(0, |e| e.gate.rows());
    let logits = sized(&mut s.logits, n * experts);
    matmul(isa, router_x, n, &moe.router, logits);
    if let Some(bias) = &moe.router_bias {
        for row in logits.chunks_exact_mut(experts) {
            row.iter_mut().zip(bias).for_each(|(l, b)| *l += b);
        }
    }
    let routing = &mut s.routing;
    routing.route(logits, n, experts, k, moe.norm_topk_prob);
    if let Some(scale) = &moe.expert_scale {
        for c in &mut routing.choices {
            c.weight *= scale[c.expert];
        }
    }
    if let Some(counts) = load {
        routing.add_load(counts);
    }

    let rows = n * k;
    let xs = sized(&mut s.xs, rows * hidden);
    let copy =
        |(dst, &t): (&mut [f32], &usize)| dst.copy_from_slice(&x[t * hidden..(t + 1) * hidden]);
    if rows <= ROWS_PER_TASK {
        // A decode step's few rows: a parallel region would cost more than the copy.
        xs.chunks_mut(hidden)
            .zip(&routing.token_of_row)
            .for_each(copy);
    } else {
        xs.par_chunks_mut(hidden)
            .zip(&routing.token_of_row)
            .for_each(copy);
    }
    let (gate, up) = (
        sized(&mut s.gate, rows * inter),
        sized(&mut s.up, rows * inter),
    );
    run_experts(
        isa,
        &moe.experts,
        routing,
        xs,
        hidden,
        &mut [(gate, |e: &Expert| &e.gate), (up, |e: &Expert| &e.up)],
    );
    add_expert_biases(&moe.experts, routing, gate, inter, 0);
    add_expert_biases(&moe.experts, routing, up, inter, 1);
    gate.par_chunks_mut(ROWS_PER_TASK * inter)
        .zip(up.par_chunks(ROWS_PER_TASK * inter))
        .for_each(|(g, u)| gated(activation, g, u));
    let ys = sized(&mut s.ys, rows * hidden);
    run_experts(
        isa,
        &moe.experts,
        routing,
        gate,
        inter,
        &mut [(ys, |e: &Expert| &e.down)],
    );
    add_expert_biases(&moe.experts, routing, ys, hidden, 2);

    let choices = &routing.choices;
    let row_of_choice = &routing.row_of_choice;
    out[..n * hidden]
        .par_chunks_mut(hidden)
        .enumerate()
        .for_each(|(t, dst)| {
            dst.fill(0.0);
            for i in t * k..(t + 1) * k {
                let (row, w) = (row_of_choice[i], choices[i].weight);
                for (o, y) in dst.iter_mut().zip(&ys[row * hidden..(row + 1) * hidden]) {
                    *o += w * y;
                }
            }
        });

    if let Some(shared) = &moe.shared {
        let width = shared.mlp.gate.rows();
        let score = sized(&mut s.shared_score, n);
        matmul(isa, x, n, &shared.gate, score);
        let (sg, su) = (
            sized(&mut s.shared_gate, n * width),
            sized(&mut s.shared_up, n * width),
        );
        matmul_group(
            isa,
            x,
            n,
            &mut [
                MatmulJob {
                    matrix: &shared.mlp.gate,
                    out: sg,
                },
                MatmulJob {
                    matrix: &shared.mlp.up,
                    out: su,
                },
            ],
        );
        gated(activation, sg, su);
        let shared_out = sized(&mut s.shared_out, n * hidden);
        matmul(isa, sg, n, &shared.mlp.down, shared_out);
        for ((dst, src), &g) in out[..n * hidden]
            .chunks_exact_mut(hidden)
            .zip(shared_out.chunks_exact(hidden))
            .zip(score.iter())
        {
            let scale = 1.0 / (1.0 + (-g).exp());
            for (o, v) in dst.iter_mut().zip(src) {
                *o += scale * v;
            }
        }
    }
}

/// Adds bias `which` (0 gate, 1 up, 2 down) of each row's expert to `rows` (`[rows, width]`,
/// grouped by expert as `routing` lays them out), for experts that have biases (gpt-oss).
fn add_expert_biases(
    experts: &[Expert],
    routing: &Routing,
    rows: &mut [f32],
    width: usize,
    which: usize,
) {
    for (expert, range) in &routing.groups {
        let Some(biases) = &experts[*expert].biases else {
            continue;
        };
        for row in rows[range.start * width..range.end * width].chunks_exact_mut(width) {
            row.iter_mut()
                .zip(&biases[which])
                .for_each(|(v, b)| *v += b);
        }
    }
}

/// Which of an expert's matrices a product uses.
type ExpertMatrix = fn(&Expert) -> &QuantMatrix;

/// For every chosen expert, `out rows = input rows · matrix(expert)ᵀ` over its group of rows,
/// for each `(out, matrix)` pair, all in one parallel region. `inputs` is `[rows, cols]`.
fn run_experts(
    isa: Isa,
    experts: &[Expert],
    routing: &Routing,
    inputs: &[f32],
    cols: usize,
    outputs: &mut [(&mut [f32], ExpertMatrix)],
) {
    let mut jobs = Vec::with_capacity(routing.groups.len() * outputs.len());
    for (out, pick) in outputs.iter_mut() {
        let mut rest: &mut [f32] = out;
        for (expert, rows) in &routing.groups {
            let matrix = pick(&experts[*expert]);
            let width = matrix.rows();
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * width);
            rest = tail;
            jobs.push(SegmentJob {
                x: &inputs[rows.start * cols..rows.end * cols],
                m: rows.len(),
                matrix,
                out: mine,
            });
        }
    }
    matmul_segments(isa, &mut jobs);
}
