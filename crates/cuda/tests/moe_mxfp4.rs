//! gpt-oss's experts on the GPU (kernels/moe_experts.cu, mxfp4.cuh): MXFP4 weights decoded in
//! registers, the router and expert biases, the clamped SwiGLU.
//!
//! - MXFP4 against bf16: the same MXFP4 blocks, once kept MXFP4 on the device and once decoded
//!   by the host's reference dequantizer (ferrite_model::dequant; every MXFP4 weight is a bf16
//!   value) and uploaded as bf16, give bit-identical outputs for every step size and item size
//!   (the decoding is exact and the sums run in one order); the blocks' exponents include the
//!   ones the kernel decodes on its slow path (0, 1) and the lower edge of its fast path (2).
//! - Biases and the clamped SwiGLU against a host reference in f64 (routing with the router
//!   bias: the same experts; outputs to 2e-3).

mod common;

use common::{dev, poisoned, read_f32, read_i32, rng, Ctx};
use ferrite_cuda::buffer::DeviceBuffer;
use ferrite_cuda::launchers::{
    moe_max_items, ExpertActivation, ExpertFormat, ExpertMatrix, MoeDownArgs, MoeGateUpArgs,
    MoeRouting,
};
use ferrite_model::config::{CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT};
use ferrite_model::dequant::dequantize_row;
use ferrite_model::weights::DType;
use half::bf16;
use rand::Rng;

const HIDDEN: usize = 256;
const WIDTH: usize = 96; // three MXFP4 blocks: not a whole 128-element block
const EXPERTS: usize = 8;
const TOP_K: usize = 2;
const TOKENS: usize = 40;
const CLAMPED: ExpertActivation = ExpertActivation::Clamped {
    alpha: CLAMPED_SWIGLU_ALPHA,
    limit: CLAMPED_SWIGLU_LIMIT,
};

/// Random MXFP4 blocks (17 bytes each) for `elements` weights of about `2^(e0 - 127)`, a few
/// blocks with the exponents the kernel treats specially.
fn mxfp4_blocks(g: &mut rand::rngs::StdRng, elements: usize, e0: u8) -> Vec<u8> {
    let blocks = elements / 32;
    let mut out = Vec::with_capacity(blocks * 17);
    for b in 0..blocks {
        let e = match b % 97 {
            5 => 0,
            11 => 1,
            17 => 2,
            23 => 130,
            _ => e0 + g.random_range(0..4u8),
        };
        out.push(e);
        out.extend((0..16).map(|_| g.random::<u8>()));
    }
    out
}

fn decode(blocks: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0f32; blocks.len() / 17 * 32];
    dequantize_row(DType::Mxfp4, blocks, &mut out);
    out
}

/// Device stacks of one set of blocks: MXFP4 planes, or the decoded weights as bf16.
fn stack(
    ctx: &Ctx,
    blocks: &[u8],
    format: ExpertFormat,
    keep: &mut Vec<DeviceBuffer>,
) -> ExpertMatrix {
    let (values, exponents) = match format {
        ExpertFormat::Bf16 => (dev(ctx, &common::to_bf16(&decode(blocks))), None),
        ExpertFormat::Mxfp4 => {
            let codes: Vec<u8> = blocks
                .chunks_exact(17)
                .flat_map(|b| b[1..].to_vec())
                .collect();
            let exps: Vec<u8> = blocks.chunks_exact(17).map(|b| b[0]).collect();
            (dev(ctx, &codes), Some(dev(ctx, &exps)))
        }
    };
    let matrix = ExpertMatrix {
        format,
        values: values.ptr(),
        exponents: exponents.as_ref().map(|e| e.ptr()),
    };
    keep.push(values);
    keep.extend(exponents);
    matrix
}

struct Inputs {
    logits: Vec<f32>,
    router_bias: Vec<f32>,
    x: Vec<f32>,
    gate: Vec<u8>,
    up: Vec<u8>,
    down: Vec<u8>,
    /// gate's, up's ([experts, width]) and down's ([experts, hidden]) biases.
    biases: [Vec<f32>; 3],
}

fn inputs(seed: u64) -> Inputs {
    let mut g = rng(seed);
    let mut uniform =
        |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| g.random_range(-s..s)).collect() };
    let (logits, router_bias) = (uniform(TOKENS * EXPERTS, 2.0), uniform(EXPERTS, 2.0));
    let biases = [
        uniform(EXPERTS * WIDTH, 0.5),
        uniform(EXPERTS * WIDTH, 0.5),
        uniform(EXPERTS * HIDDEN, 0.5),
    ];
    let x = common::bf16_round(&uniform(TOKENS * HIDDEN, 1.0));
    let mut g = rng(seed + 1);
    // Weights around 2^-4 (gate/up: sums of 256 products reach the clamp at 7) and 2^-5.
    Inputs {
        logits,
        router_bias,
        x,
        gate: mxfp4_blocks(&mut g, EXPERTS * WIDTH * HIDDEN, 122),
        up: mxfp4_blocks(&mut g, EXPERTS * WIDTH * HIDDEN, 122),
        down: mxfp4_blocks(&mut g, EXPERTS * HIDDEN * WIDTH, 121),
        biases,
    }
}

/// The routing with the router bias, in f64: softmax over the top-k biased logits, by id.
fn host_route(logits: &[f32], bias: &[f32]) -> Vec<(usize, f64)> {
    let l: Vec<f64> = logits
        .iter()
        .zip(bias)
        .map(|(&a, &b)| (a + b) as f64)
        .collect();
    let mut order: Vec<usize> = (0..l.len()).collect();
    order.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
    let top = &order[..TOP_K];
    let max = l[top[0]];
    let sum: f64 = top.iter().map(|&e| (l[e] - max).exp()).sum();
    let mut chosen: Vec<(usize, f64)> =
        top.iter().map(|&e| (e, (l[e] - max).exp() / sum)).collect();
    chosen.sort_by_key(|c| c.0);
    chosen
}

fn host_mlp(inp: &Inputs, t: usize) -> Vec<f64> {
    let (gate, up, down) = (decode(&inp.gate), decode(&inp.up), decode(&inp.down));
    let x = &inp.x[t * HIDDEN..(t + 1) * HIDDEN];
    let dot =
        |w: &[f32], v: &[f32]| -> f64 { w.iter().zip(v).map(|(&a, &b)| a as f64 * b as f64).sum() };
    let (alpha, limit) = (CLAMPED_SWIGLU_ALPHA as f64, CLAMPED_SWIGLU_LIMIT as f64);
    let mut out = vec![0.0f64; HIDDEN];
    for (e, w) in host_route(
        &inp.logits[t * EXPERTS..(t + 1) * EXPERTS],
        &inp.router_bias,
    ) {
        let act: Vec<f32> = (0..WIDTH)
            .map(|i| {
                let r = (e * WIDTH + i) * HIDDEN;
                let g = dot(&gate[r..r + HIDDEN], x) + inp.biases[0][e * WIDTH + i] as f64;
                let u = dot(&up[r..r + HIDDEN], x) + inp.biases[1][e * WIDTH + i] as f64;
                let g = g.min(limit);
                let glu = g / (1.0 + (-g * alpha).exp());
                bf16::from_f64((u.clamp(-limit, limit) + 1.0) * glu).to_f32()
            })
            .collect();
        for (h, o) in out.iter_mut().enumerate() {
            let r = (e * HIDDEN + h) * WIDTH;
            *o += w * (dot(&down[r..r + WIDTH], &act) + inp.biases[2][e * HIDDEN + h] as f64);
        }
    }
    out
}

/// The four kernels over the first `n` tokens, experts in `format`: (outputs, expert ids).
fn run(
    ctx: &Ctx,
    inp: &Inputs,
    format: ExpertFormat,
    n: usize,
    chunk: usize,
) -> (Vec<f32>, Vec<i32>) {
    let k = &ctx.kernels;
    let routed = n * TOP_K;
    let mut keep = Vec::new();
    let (gate, up, down) = (
        stack(ctx, &inp.gate, format, &mut keep),
        stack(ctx, &inp.up, format, &mut keep),
        stack(ctx, &inp.down, format, &mut keep),
    );
    let logits = dev(ctx, &inp.logits[..n * EXPERTS]);
    let router_bias = dev(ctx, &inp.router_bias);
    let [bg, bu, bd] = [0, 1, 2].map(|i| dev(ctx, &inp.biases[i]));
    let x = dev(ctx, &common::to_bf16(&inp.x[..n * HIDDEN]));
    let ids = poisoned::<i32>(ctx, routed);
    let weights = poisoned::<f32>(ctx, routed);
    let row_of_choice = poisoned::<i32>(ctx, routed);
    let token_of_row = poisoned::<i32>(ctx, routed);
    let items = poisoned::<[i32; 4]>(ctx, moe_max_items(routed, EXPERTS, chunk));
    let r = MoeRouting {
        ids: ids.ptr(),
        weights: weights.ptr(),
        row_of_choice: row_of_choice.ptr(),
        token_of_row: token_of_row.ptr(),
        items: items.ptr(),
    };
    let act = poisoned::<bf16>(ctx, routed * WIDTH);
    let ys = poisoned::<f32>(ctx, routed * HIDDEN);
    let out = poisoned::<f32>(ctx, n * HIDDEN);
    k.moe_route_group(
        logits.ptr(),
        EXPERTS,
        TOP_K,
        true,
        n,
        &r,
        chunk,
        None,
        Some(router_bias.ptr()),
    )
    .unwrap();
    let gate_up = MoeGateUpArgs {
        gate,
        up,
        width: WIDTH,
        x: x.ptr(),
        act: act.ptr(),
        k: HIDDEN,
        biases: Some((bg.ptr(), bu.ptr())),
        activation: CLAMPED,
    };
    k.moe_gate_up(&gate_up, &r, routed, EXPERTS, chunk).unwrap();
    let down_args = MoeDownArgs {
        down,
        rows: HIDDEN,
        act: act.ptr(),
        y: ys.ptr(),
        k: WIDTH,
        bias: Some(bd.ptr()),
    };
    k.moe_down(&down_args, &r, routed, EXPERTS, chunk).unwrap();
    k.moe_combine(ys.ptr(), &r, TOP_K, HIDDEN, None, out.ptr(), n)
        .unwrap();
    (read_f32(ctx, &out, n * HIDDEN), read_i32(ctx, &ids, routed))
}

#[test]
fn mxfp4_experts_with_biases_match_the_host_and_their_bf16_decoding_bit_for_bit() {
    let Some(ctx) = common::gpu("moe mxfp4") else {
        return;
    };
    let inp = inputs(38);
    let (all, ids) = run(&ctx, &inp, ExpertFormat::Mxfp4, TOKENS, 8);
    for t in 0..TOKENS {
        let want: Vec<i32> = host_route(
            &inp.logits[t * EXPERTS..(t + 1) * EXPERTS],
            &inp.router_bias,
        )
        .iter()
        .map(|c| c.0 as i32)
        .collect();
        assert_eq!(
            &ids[t * TOP_K..(t + 1) * TOP_K],
            &want[..],
            "token {t}'s experts"
        );
    }
    let want: Vec<f64> = (0..TOKENS).flat_map(|t| host_mlp(&inp, t)).collect();
    common::check("mxfp4 experts vs f64 host", &all, &want, 2e-3);
    for (n, chunk) in [(TOKENS, 8), (TOKENS, 32), (1, 8), (9, 32)] {
        let (mx, _) = run(&ctx, &inp, ExpertFormat::Mxfp4, n, chunk);
        let (bf, _) = run(&ctx, &inp, ExpertFormat::Bf16, n, chunk);
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same(&mx, &bf),
            "{n} tokens, items of {chunk}: MXFP4 and its bf16 decoding differ"
        );
        assert!(
            same(&mx, &all[..n * HIDDEN]),
            "{n} tokens, items of {chunk}: differ from 40 tokens'"
        );
    }
}
