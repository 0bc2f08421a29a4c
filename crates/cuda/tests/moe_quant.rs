//! GGUF-quantized experts on the GPU (kernels/quant_pieces.cuh in moe_experts.cu and
//! moe_tile.cu): Q8_0, Q4_K, Q5_K and Q6_K stacks kept in their blocks and decoded in
//! registers.
//!
//! - Against bf16: the same blocks, once kept quantized on the device and once decoded by the
//!   host's reference dequantizer (ferrite_model::dequant) and rounded to bf16 as the loader
//!   widens them, give bit-identical outputs for every step size and item size (the skinny
//!   products of 8 and 32 rows and the 128-row tiles).
//! - Against the host in f64 on the decoded weights rounded to bf16 (routing, clamped SwiGLU,
//!   biases), so that a wrong decoding cannot pass by agreeing with the bf16 path alone.

mod common;

use common::experts::{
    assert_same_as_bf16_at_every_size, decode, host_mlp, random_layer, run_layer, with_blocks,
    Dims, Layer,
};
use ferrite_cuda::launchers::{ExpertFormat, EXPERT_QUANT_TYPES};
use ferrite_cuda::quant::QuantType;

const TOKENS: usize = 40;

/// k of both products whole K-quant blocks: hidden 512 (two blocks), width 256.
const K_DIMS: Dims = Dims {
    hidden: 512,
    width: 256,
    experts: 8,
    top_k: 2,
};

/// Q8_0's blocks are 32: k of 288 and 96, not whole 128-element k-blocks (the kernels' zeros
/// past k).
const Q8_DIMS: Dims = Dims {
    hidden: 288,
    width: 96,
    experts: 8,
    top_k: 2,
};

fn layer_of(q: QuantType, seed: u64) -> Layer {
    let dims = if q == QuantType::Q8_0 {
        Q8_DIMS
    } else {
        K_DIMS
    };
    with_blocks(random_layer(seed, dims, TOKENS), q.dtype(), seed + 10)
}

#[test]
fn quantized_experts_match_their_bf16_decoding_bit_for_bit_and_the_host() {
    let Some(ctx) = common::gpu("moe quant") else {
        return;
    };
    for (i, q) in EXPERT_QUANT_TYPES.into_iter().enumerate() {
        let layer = layer_of(q, 50 + 20 * i as u64);
        let format = ExpertFormat::Quant(q);
        let (all, _) = run_layer(&ctx, &layer, format, TOKENS, 8);
        let decoded = [&layer.gate, &layer.up, &layer.down]
            .map(|b| common::bf16_round(&decode(layer.dtype, b)));
        let want: Vec<f64> = (0..TOKENS)
            .flat_map(|t| host_mlp(&layer, &decoded, t))
            .collect();
        common::check(&format!("{q:?} experts vs f64 host"), &all, &want, 2e-3);
        assert_same_as_bf16_at_every_size(&ctx, &layer, format, &all);
    }
}
