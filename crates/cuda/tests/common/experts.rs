//! The expert tests' shared pieces (moe.rs, moe_mxfp4.rs, moe_tile.rs, moe_quant.rs): random
//! MXFP4 or GGUF blocks and their host decoding, expert stacks on the device in any format, a
//! step's routing buffers, and one routed MLP step
//! through the four kernels (route + group, gate/up, down, combine) at a given item size.

use ferrite_cuda::buffer::DeviceBuffer;
use ferrite_cuda::launchers::{
    moe_max_items, ExpertActivation, ExpertFormat, ExpertMatrix, MoeDownArgs, MoeGateUpArgs,
    MoeRouting,
};
use ferrite_cuda::quant::split_planes;
use ferrite_model::config::{CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT};
use ferrite_model::dequant::dequantize_row;
use ferrite_model::weights::DType;
use half::bf16;
use rand::Rng;

use super::{dev, poisoned, read_f32, read_i32, Ctx};

/// Random MXFP4 blocks (17 bytes each: exponent, 16 code bytes) for `elements` weights of
/// about `2^(e0 - 127)`, a few blocks with the exponents the kernels treat specially (0 and 1
/// take the slow path, 2 is the fast path's lower edge).
pub fn mxfp4_blocks(g: &mut rand::rngs::StdRng, elements: usize, e0: u8) -> Vec<u8> {
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

/// The host's reference decoding of blocks of `dtype`.
pub fn decode(dtype: DType, blocks: &[u8]) -> Vec<f32> {
    let f = ferrite_model::quant::format(dtype);
    let mut out = vec![0.0f32; blocks.len() / f.block_bytes * f.block_len];
    dequantize_row(dtype, blocks, &mut out);
    out
}

/// Device stacks of one set of blocks of `dtype`: MXFP4's or a GGUF type's planes, or the
/// decoded weights as bf16.
pub fn stack(
    ctx: &Ctx,
    dtype: DType,
    blocks: &[u8],
    format: ExpertFormat,
    keep: &mut Vec<DeviceBuffer>,
) -> ExpertMatrix {
    let (values, second) = match format {
        ExpertFormat::Bf16 => (dev(ctx, &super::to_bf16(&decode(dtype, blocks))), None),
        ExpertFormat::Quant(q) => {
            assert_eq!(q.dtype(), dtype);
            let mut planes = split_planes(q, blocks).into_iter().map(|p| dev(ctx, &p));
            let first = planes.next().expect("a first plane");
            (first, planes.next())
        }
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
        second_plane: second.as_ref().map(|e| e.ptr()),
    };
    keep.push(values);
    keep.extend(second);
    matrix
}

/// One step's routing buffers for `routed` choices in items of `chunk` rows, poisoned.
pub struct RoutingBuffers {
    pub ids: DeviceBuffer,
    pub weights: DeviceBuffer,
    pub row_of_choice: DeviceBuffer,
    pub token_of_row: DeviceBuffer,
    pub items: DeviceBuffer,
}

impl RoutingBuffers {
    pub fn new(ctx: &Ctx, routed: usize, experts: usize, chunk: usize) -> Self {
        RoutingBuffers {
            ids: poisoned::<i32>(ctx, routed),
            weights: poisoned::<f32>(ctx, routed),
            row_of_choice: poisoned::<i32>(ctx, routed),
            token_of_row: poisoned::<i32>(ctx, routed),
            items: poisoned::<[i32; 4]>(ctx, moe_max_items(routed, experts, chunk)),
        }
    }

    pub fn routing(&self) -> MoeRouting {
        MoeRouting {
            ids: self.ids.ptr(),
            weights: self.weights.ptr(),
            row_of_choice: self.row_of_choice.ptr(),
            token_of_row: self.token_of_row.ptr(),
            items: self.items.ptr(),
        }
    }
}

/// A layer's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub hidden: usize,
    pub width: usize,
    pub experts: usize,
    pub top_k: usize,
}

/// A gpt-oss-style expert layer (MXFP4 or GGUF blocks, router and expert biases) and its
/// tokens.
pub struct Layer {
    pub dims: Dims,
    /// The stacks' block type.
    pub dtype: DType,
    pub logits: Vec<f32>,
    pub router_bias: Vec<f32>,
    /// bf16 values, as f32.
    pub x: Vec<f32>,
    pub gate: Vec<u8>,
    pub up: Vec<u8>,
    pub down: Vec<u8>,
    /// gate's, up's ([experts, width]) and down's ([experts, hidden]) biases.
    pub biases: [Vec<f32>; 3],
    pub activation: ExpertActivation,
}

/// A random layer of `dims` for `tokens` tokens: weights around 2^-4 for gate/up (sums of
/// 256 products reach the clamp at 7) and 2^-5 for down.
pub fn random_layer(seed: u64, dims: Dims, tokens: usize) -> Layer {
    let Dims {
        hidden,
        width,
        experts,
        ..
    } = dims;
    let mut g = super::rng(seed);
    let mut uniform =
        |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| g.random_range(-s..s)).collect() };
    let (logits, router_bias) = (uniform(tokens * experts, 2.0), uniform(experts, 2.0));
    let biases = [
        uniform(experts * width, 0.5),
        uniform(experts * width, 0.5),
        uniform(experts * hidden, 0.5),
    ];
    let x = super::bf16_round(&uniform(tokens * hidden, 1.0));
    let mut g = super::rng(seed + 1);
    Layer {
        dims,
        dtype: DType::Mxfp4,
        logits,
        router_bias,
        x,
        gate: mxfp4_blocks(&mut g, experts * width * hidden, 122),
        up: mxfp4_blocks(&mut g, experts * width * hidden, 122),
        down: mxfp4_blocks(&mut g, experts * hidden * width, 121),
        biases,
        activation: ExpertActivation::Clamped {
            alpha: CLAMPED_SWIGLU_ALPHA,
            limit: CLAMPED_SWIGLU_LIMIT,
        },
    }
}

/// `layer` with its stacks replaced by random blocks of `dtype` (GGUF types: weights of about
/// 2^-4 for gate/up and 2^-5 for down, as `random_layer`'s).
pub fn with_blocks(layer: Layer, dtype: DType, seed: u64) -> Layer {
    let Dims {
        hidden,
        width,
        experts,
        ..
    } = layer.dims;
    let blocks = |rows: usize, cols: usize, scale: f32, key: u64| {
        super::quant::random_blocks(dtype, experts * rows, cols, scale, key)
    };
    Layer {
        dtype,
        gate: blocks(width, hidden, 0.0625, seed),
        up: blocks(width, hidden, 0.0625, seed + 1),
        down: blocks(hidden, width, 0.03125, seed + 2),
        ..layer
    }
}

/// Runs the four kernels over the first `n` tokens of `layer`, experts in `format`, items of
/// `chunk` rows: (outputs f32 [n, hidden], expert ids [n, k]).
pub fn run_layer(
    ctx: &Ctx,
    layer: &Layer,
    format: ExpertFormat,
    n: usize,
    chunk: usize,
) -> (Vec<f32>, Vec<i32>) {
    let Dims {
        hidden,
        width,
        experts,
        top_k,
    } = layer.dims;
    let k = &ctx.kernels;
    let routed = n * top_k;
    let mut keep = Vec::new();
    let (gate, up, down) = (
        stack(ctx, layer.dtype, &layer.gate, format, &mut keep),
        stack(ctx, layer.dtype, &layer.up, format, &mut keep),
        stack(ctx, layer.dtype, &layer.down, format, &mut keep),
    );
    let logits = dev(ctx, &layer.logits[..n * experts]);
    let router_bias = dev(ctx, &layer.router_bias);
    let [bg, bu, bd] = [0, 1, 2].map(|i| dev(ctx, &layer.biases[i]));
    let x = dev(ctx, &super::to_bf16(&layer.x[..n * hidden]));
    let routing = RoutingBuffers::new(ctx, routed, experts, chunk);
    let r = routing.routing();
    let act = poisoned::<bf16>(ctx, routed * width);
    let ys = poisoned::<f32>(ctx, routed * hidden);
    let out = poisoned::<f32>(ctx, n * hidden);
    k.moe_route_group(
        logits.ptr(),
        experts,
        top_k,
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
        width,
        x: x.ptr(),
        act: act.ptr(),
        k: hidden,
        biases: Some((bg.ptr(), bu.ptr())),
        activation: layer.activation,
    };
    k.moe_gate_up(&gate_up, &r, routed, experts, chunk).unwrap();
    let down_args = MoeDownArgs {
        down,
        rows: hidden,
        act: act.ptr(),
        y: ys.ptr(),
        k: width,
        bias: Some(bd.ptr()),
    };
    k.moe_down(&down_args, &r, routed, experts, chunk).unwrap();
    k.moe_combine(ys.ptr(), &r, top_k, hidden, None, out.ptr(), n)
        .unwrap();
    (
        read_f32(ctx, &out, n * hidden),
        read_i32(ctx, &routing.ids, routed),
    )
}

/// `format`'s outputs of `layer` against the same stacks decoded to bf16, and against `all` (the
/// first `TOKENS` tokens' outputs in `format`), bit for bit, for steps of 40, 9 and 1 tokens in
/// every item size: the decoding is exact and no sum depends on the step.
pub fn assert_same_as_bf16_at_every_size(
    ctx: &Ctx,
    layer: &Layer,
    format: ExpertFormat,
    all: &[f32],
) {
    let tokens = all.len() / layer.dims.hidden;
    for (n, chunk) in [
        (tokens, 8),
        (tokens, 32),
        (tokens, 128),
        (1, 8),
        (9, 32),
        (9, 128),
    ] {
        let (out, _) = run_layer(ctx, layer, format, n, chunk);
        let (bf, _) = run_layer(ctx, layer, ExpertFormat::Bf16, n, chunk);
        assert!(
            same_bits(&out, &bf),
            "{format:?}, {n} tokens, items of {chunk}: the blocks and their bf16 decoding differ"
        );
        assert!(
            same_bits(&out, &all[..n * layer.dims.hidden]),
            "{format:?}, {n} tokens, items of {chunk}: differ from {tokens} tokens'"
        );
    }
}

/// Whether two outputs are the same bit for bit.
pub fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The routing with the router bias, in f64: softmax over the top-k biased logits, by id.
pub fn host_route(layer: &Layer, t: usize) -> Vec<(usize, f64)> {
    let e = layer.dims.experts;
    let l: Vec<f64> = layer.logits[t * e..(t + 1) * e]
        .iter()
        .zip(&layer.router_bias)
        .map(|(&a, &b)| (a + b) as f64)
        .collect();
    let mut order: Vec<usize> = (0..l.len()).collect();
    order.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
    let top = &order[..layer.dims.top_k];
    let max = l[top[0]];
    let sum: f64 = top.iter().map(|&e| (l[e] - max).exp()).sum();
    let mut chosen: Vec<(usize, f64)> =
        top.iter().map(|&e| (e, (l[e] - max).exp() / sum)).collect();
    chosen.sort_by_key(|c| c.0);
    chosen
}

/// The layer's output for token `t` in f64 from the host-decoded weights (`decoded`: gate,
/// up, down), the activation rounded to bf16 as the kernels store it; the clamped SwiGLU
/// (`ExpertActivation::Clamped`).
pub fn host_mlp(layer: &Layer, decoded: &[Vec<f32>; 3], t: usize) -> Vec<f64> {
    let Dims { hidden, width, .. } = layer.dims;
    let ExpertActivation::Clamped { alpha, limit } = layer.activation else {
        panic!("host_mlp is the clamped SwiGLU's reference");
    };
    let [gate, up, down] = decoded;
    let x = &layer.x[t * hidden..(t + 1) * hidden];
    let dot =
        |w: &[f32], v: &[f32]| -> f64 { w.iter().zip(v).map(|(&a, &b)| a as f64 * b as f64).sum() };
    let (alpha, limit) = (alpha as f64, limit as f64);
    let mut out = vec![0.0f64; hidden];
    for (e, w) in host_route(layer, t) {
        let act: Vec<f32> = (0..width)
            .map(|i| {
                let r = (e * width + i) * hidden;
                let g = dot(&gate[r..r + hidden], x) + layer.biases[0][e * width + i] as f64;
                let u = dot(&up[r..r + hidden], x) + layer.biases[1][e * width + i] as f64;
                let g = g.min(limit);
                let glu = g / (1.0 + (-g * alpha).exp());
                bf16::from_f64((u.clamp(-limit, limit) + 1.0) * glu).to_f32()
            })
            .collect();
        for (h, o) in out.iter_mut().enumerate() {
            let r = (e * hidden + h) * width;
            *o += w * (dot(&down[r..r + width], &act) + layer.biases[2][e * hidden + h] as f64);
        }
    }
    out
}
