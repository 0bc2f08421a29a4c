//! Issue 13's GPU checks of the mixture-of-experts MLP (kernels/moe.cu, src/moe_mlp.rs):
//!
//! - the kernels alone against a host reference in f64 on the same bf16 inputs (routing
//!   exactly: the same experts; outputs to 2e-3), and a token's output bit for bit the same
//!   whether it runs alone, with 8 others or with 39, in work items of 8 rows or of 32 (batch
//!   invariance: it does not depend on which other tokens share its experts); the expert-load
//!   counters count each expert's tokens, a graph's padding rows (KV slot -1) left out;
//! - whole random-weight models, CPU against CUDA on the same weights (the parity tests'
//!   tolerances, graphs and eager): qwen3_moe's top-k with normalised weights and Q/K norm,
//!   qwen2_moe's shared expert beside a dense layer, mixtral's top-2 with widths that are not
//!   whole 128-element blocks, 64 experts routed 8 at a time, and GGUF-quantized expert stacks
//!   kept in their blocks on the device (tests/moe_quant.rs checks their kernels).

mod common;

use common::compare::{compare_and_report_apart, compare_backends, compare_on_device_apart, Run};
use common::experts::RoutingBuffers;
use common::{dev, poisoned, read_f32, read_i32, rng, Ctx};
use ferrite_cuda::launchers::{
    ExpertActivation, ExpertCounters, ExpertFormat, ExpertMatrix, MoeDownArgs, MoeGateUpArgs,
};
use ferrite_model::config::{Arch, BlockVariant, ModelConfig, MoeConfig, RopeStyle};
use ferrite_model::dummy::{generate, quantized::quantize_matrices};
use ferrite_model::weights::{DType, ModelWeights, Storage, WeightTensor};
use half::bf16;
use rand::Rng;
use std::sync::Arc;

const HIDDEN: usize = 256;
const WIDTH: usize = 96; // not a whole 128-element block: the last block is zero-filled
const EXPERTS: usize = 16;
const TOP_K: usize = 4;
const TOKENS: usize = 40;

/// Random bf16 values (as f32, exactly representable).
fn bf16_values(rng: &mut rand::rngs::StdRng, n: usize, scale: f32) -> Vec<f32> {
    common::bf16_round(&common::random(rng, n, scale))
}

struct Inputs {
    logits: Vec<f32>,
    x: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

/// Softmax in f64, the k largest (ties to the lower id), divided by their sum, by expert id.
fn host_route(logits: &[f32]) -> Vec<(usize, f64)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let p: Vec<f64> = logits.iter().map(|&l| (l as f64 - max).exp()).collect();
    let sum: f64 = p.iter().sum();
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
    let mut chosen: Vec<(usize, f64)> = order[..TOP_K].iter().map(|&e| (e, p[e] / sum)).collect();
    let total: f64 = chosen.iter().map(|c| c.1).sum();
    chosen.iter_mut().for_each(|c| c.1 /= total);
    chosen.sort_by_key(|c| c.0);
    chosen
}

fn dot(w: &[f32], x: &[f32]) -> f64 {
    w.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum()
}

/// The MLP output of token `t` in f64 (the activation rounded to bf16, as the kernels store it).
fn host_mlp(inp: &Inputs, t: usize) -> Vec<f64> {
    let x = &inp.x[t * HIDDEN..(t + 1) * HIDDEN];
    let mut out = vec![0.0f64; HIDDEN];
    for (e, w) in host_route(&inp.logits[t * EXPERTS..(t + 1) * EXPERTS]) {
        let row = |m: &[f32], r: usize, k: usize| {
            m[(e * (m.len() / EXPERTS / k) + r) * k..][..k].to_vec()
        };
        let act: Vec<f32> = (0..WIDTH)
            .map(|i| {
                let g = dot(&row(&inp.gate, i, HIDDEN), x);
                let u = dot(&row(&inp.up, i, HIDDEN), x);
                bf16::from_f64(g / (1.0 + (-g).exp()) * u).to_f32()
            })
            .collect();
        for (h, o) in out.iter_mut().enumerate() {
            *o += w * dot(&row(&inp.down, h, WIDTH), &act);
        }
    }
    out
}

/// Runs the four kernels over the first `n` tokens in work items of `chunk` rows; returns
/// (out f32 [n, hidden], ids).
/// Tokens marked as a graph's padding (KV slot -1): the expert-load counters skip them.
const PADDING: [usize; 2] = [3, 17];

struct KernelRun {
    out: Vec<f32>,
    ids: Vec<i32>,
    /// The expert-load counters after the step.
    load: Vec<u64>,
}

fn run_kernels(ctx: &Ctx, inp: &Inputs, n: usize, chunk: usize) -> KernelRun {
    let k = &ctx.kernels;
    let routed = n * TOP_K;
    let to_bf16 = |v: &[f32]| common::to_bf16(v);
    let logits = dev(ctx, &inp.logits[..n * EXPERTS]);
    let x = dev(ctx, &to_bf16(&inp.x[..n * HIDDEN]));
    let (gate, up, down) = (
        dev(ctx, &to_bf16(&inp.gate)),
        dev(ctx, &to_bf16(&inp.up)),
        dev(ctx, &to_bf16(&inp.down)),
    );
    let routing = RoutingBuffers::new(ctx, routed, EXPERTS, chunk);
    let r = routing.routing();
    let act = poisoned::<bf16>(ctx, routed * WIDTH);
    let ys = poisoned::<f32>(ctx, routed * HIDDEN);
    let out = poisoned::<f32>(ctx, n * HIDDEN);
    let slots: Vec<i32> = (0..n as i32)
        .map(|t| {
            if PADDING.contains(&(t as usize)) {
                -1
            } else {
                t
            }
        })
        .collect();
    let slots = dev(ctx, &slots);
    let counts = dev(ctx, &[0u64; EXPERTS]);
    let load = ExpertCounters {
        counts: counts.ptr(),
        slots: slots.ptr(),
    };
    k.moe_route_group(
        logits.ptr(),
        EXPERTS,
        TOP_K,
        true,
        n,
        &r,
        chunk,
        Some(load),
        None,
    )
    .unwrap();
    let bf16_stack = |b: &ferrite_cuda::buffer::DeviceBuffer| ExpertMatrix {
        format: ExpertFormat::Bf16,
        values: b.ptr(),
        second_plane: None,
    };
    let gate_up = MoeGateUpArgs {
        gate: bf16_stack(&gate),
        up: bf16_stack(&up),
        width: WIDTH,
        x: x.ptr(),
        act: act.ptr(),
        k: HIDDEN,
        biases: None,
        activation: ExpertActivation::Swiglu,
    };
    k.moe_gate_up(&gate_up, &r, routed, EXPERTS, chunk).unwrap();
    let down_args = MoeDownArgs {
        down: bf16_stack(&down),
        rows: HIDDEN,
        act: act.ptr(),
        y: ys.ptr(),
        k: WIDTH,
        bias: None,
    };
    k.moe_down(&down_args, &r, routed, EXPERTS, chunk).unwrap();
    k.moe_combine(ys.ptr(), &r, TOP_K, HIDDEN, None, out.ptr(), n)
        .unwrap();
    let mut load = vec![0u64; EXPERTS];
    ferrite_cuda::buffer::download(common::stream(ctx), counts.ptr(), &mut load).unwrap();
    KernelRun {
        out: read_f32(ctx, &out, n * HIDDEN),
        ids: read_i32(ctx, &routing.ids, routed),
        load,
    }
}

#[test]
fn moe_kernels_match_the_host_and_a_token_does_not_depend_on_its_batch() {
    let Some(ctx) = common::gpu("moe kernels") else {
        return;
    };
    let mut g = rng(13);
    let inp = Inputs {
        logits: (0..TOKENS * EXPERTS)
            .map(|_| g.random_range(-3.0f32..3.0))
            .collect(),
        x: bf16_values(&mut g, TOKENS * HIDDEN, 1.0),
        gate: bf16_values(&mut g, EXPERTS * WIDTH * HIDDEN, 0.06),
        up: bf16_values(&mut g, EXPERTS * WIDTH * HIDDEN, 0.06),
        down: bf16_values(&mut g, EXPERTS * HIDDEN * WIDTH, 0.1),
    };
    let KernelRun {
        out: all,
        ids,
        load,
    } = run_kernels(&ctx, &inp, TOKENS, 8);
    let mut want_load = [0u64; EXPERTS];
    for t in (0..TOKENS).filter(|t| !PADDING.contains(t)) {
        for (e, _) in host_route(&inp.logits[t * EXPERTS..(t + 1) * EXPERTS]) {
            want_load[e] += 1;
        }
    }
    assert_eq!(
        load, want_load,
        "expert-load counts (padding rows excluded)"
    );
    for t in 0..TOKENS {
        let want_ids: Vec<i32> = host_route(&inp.logits[t * EXPERTS..(t + 1) * EXPERTS])
            .iter()
            .map(|c| c.0 as i32)
            .collect();
        assert_eq!(
            &ids[t * TOP_K..(t + 1) * TOP_K],
            &want_ids[..],
            "token {t}'s experts"
        );
    }
    let want: Vec<f64> = (0..TOKENS).flat_map(|t| host_mlp(&inp, t)).collect();
    common::check("moe MLP vs f64 host", &all, &want, 2e-3);
    // Items of 32 rows and the tiles of 128 (the prefill kernels), and fewer tokens: the same
    // bits.
    for (n, chunk) in [
        (TOKENS, 32),
        (TOKENS, 128),
        (1, 8),
        (9, 8),
        (9, 32),
        (9, 128),
    ] {
        let alone = run_kernels(&ctx, &inp, n, chunk).out;
        let same = alone
            .iter()
            .zip(&all)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "the first {n} tokens' outputs (items of {chunk}) differ from 40 tokens' (items of 8)"
        );
    }
}

fn moe_model(arch: Arch, layers: usize, moe: MoeConfig) -> ModelConfig {
    let head_dim = 64;
    ModelConfig {
        arch,
        vocab_size: 1024,
        hidden_size: 256,
        intermediate_size: 352,
        num_layers: layers,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim,
        rope_theta: 1e6,
        rope_style: RopeStyle::Halves,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 32_768,
        tie_word_embeddings: false,
        qkv_bias: false,
        block: BlockVariant::llama(head_dim),
        rope_scaling: None,
        layer_attention: Vec::new(),
        moe: Some(moe),
        linear_attention: None,
    }
}

fn experts(num: usize, k: usize, width: usize, normalize: bool, layers: usize) -> MoeConfig {
    MoeConfig {
        num_experts: num,
        experts_per_token: k,
        expert_intermediate_size: width,
        norm_topk_prob: normalize,
        shared_expert_intermediate_size: None,
        sparse_layers: vec![true; layers],
        biases: false,
    }
}

fn run(page_size: usize, eager: bool) -> Run {
    Run {
        page_size,
        eager,
        lens: &[70, 100, 33, 9],
        decodes: 20,
        max_rel_err: 2e-2,
        outliers: 4,
        batch_invariant: true,
    }
}

#[test]
fn qwen3_moe_matches_the_cpu() {
    let mut c = moe_model(Arch::Qwen3, 3, experts(8, 2, 128, true, 3));
    c.block.qk_norm = true;
    compare_backends(&c, &run(16, false));
    compare_backends(&c, &run(1, true));
}

#[test]
fn qwen2_moe_shared_expert_and_dense_layer_match_the_cpu() {
    let mut moe = experts(8, 4, 96, false, 3);
    moe.shared_expert_intermediate_size = Some(192);
    moe.sparse_layers = vec![true, false, true];
    let mut c = moe_model(Arch::Qwen2, 3, moe);
    c.qkv_bias = true;
    compare_backends(&c, &run(16, false));
}

#[test]
fn mixtral_top2_matches_the_cpu() {
    let c = moe_model(Arch::Mistral, 2, experts(8, 2, 224, true, 2));
    compare_backends(&c, &run(16, false));
    compare_backends(&c, &run(16, true));
}

#[test]
fn sixty_four_experts_top8_match_the_cpu() {
    let c = moe_model(Arch::Qwen3, 2, experts(64, 8, 128, true, 2));
    compare_backends(&c, &run(16, false));
}

/// `weights` with every quantized expert stack replaced by the bf16 values the device computes
/// with: the host dequantizer's weights rounded to bf16 (kernels/quant_pieces.cuh).
fn stacks_as_bf16(weights: &ModelWeights) -> ModelWeights {
    let mut out = weights.clone();
    for (name, t) in &weights.tensors {
        if t.shape.len() != 3 || t.dtype == DType::BF16 {
            continue;
        }
        let values: Vec<u8> = ferrite_model::dequant::dequantize(t)
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect();
        let tensor = WeightTensor {
            dtype: DType::BF16,
            shape: t.shape.clone(),
            storage: Storage::Owned(Arc::new(values)),
        };
        out.tensors.insert(name.clone(), tensor);
    }
    out
}

/// Q4_K gate and up with Q6_K down (Q4_K_M's mix), Q5_K gate and up with Q8_0 down, and gate
/// and up of different types (both widened to bf16 at load: one kernel reads both), the rest
/// of the model bf16: CUDA with the quantized stacks (kept in their blocks, or widened) against
/// the CPU on the values the device is specified to compute with -- the host's dequantization
/// rounded to bf16 -- graphs and eager. (Against the CPU's exact f32 weights the bf16 rounding
/// alone flips this random model's expert choices past the outlier allowance: measured
/// 2026-12-07, 5+ decode rows off by up to 0.25.)
#[test]
fn quantized_expert_stacks_match_the_cpu() {
    let mut c = moe_model(Arch::Qwen3, 2, experts(8, 2, 256, true, 2));
    c.block.qk_norm = true;
    for [gate, up, down] in [
        [DType::Q4_K, DType::Q4_K, DType::Q6_K],
        [DType::Q5_K, DType::Q5_K, DType::Q8_0],
        [DType::Q4_K, DType::Q5_K, DType::Q4_K],
    ] {
        println!("experts {gate:?} / {up:?} / {down:?}:");
        let pick = |name: &str| {
            Some(match name {
                n if n.contains("ffn_gate_exps") => gate,
                n if n.contains("ffn_up_exps") => up,
                n if n.contains("ffn_down_exps") => down,
                _ => return None,
            })
        };
        let file = quantize_matrices(&generate(&c, 5), &pick, 0.02, 17);
        let values = stacks_as_bf16(&file);
        // First CUDA on the stacks decoded to bf16 as the reference, bit for bit (moe_quant's
        // kernel-level claim, here through the whole model), then the CPU, eager and graphs,
        // every verdict before the assertion: on 2026-12-07 the CPU comparison failed on
        // decode-only steps, eager and graphs alike (0.252 at step 21), while moe_quant
        // passed; this tells which side moves.
        let exact = Run {
            max_rel_err: 0.0,
            outliers: 0,
            ..run(16, true)
        };
        let mut broke: Vec<String> =
            compare_on_device_apart(&c, &exact, values.clone(), file.clone())
                .into_iter()
                .map(|line| format!("device, bf16 stacks vs blocks: {line}"))
                .collect();
        for eager in [true, false] {
            let apart = compare_and_report_apart(&c, &run(16, eager), values.clone(), file.clone());
            broke.extend(
                apart
                    .into_iter()
                    .map(|line| format!("CPU, eager={eager}: {line}")),
            );
        }
        assert!(broke.is_empty(), "{}", broke.join("\n"));
    }
}
