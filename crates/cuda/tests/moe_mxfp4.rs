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

use common::experts::{
    assert_same_as_bf16_at_every_size, decode, host_mlp, host_route, random_layer, run_layer, Dims,
};
use ferrite_cuda::launchers::ExpertFormat;

const DIMS: Dims = Dims {
    hidden: 256,
    width: 96, // three MXFP4 blocks: not a whole 128-element block
    experts: 8,
    top_k: 2,
};
const TOKENS: usize = 40;

#[test]
fn mxfp4_experts_with_biases_match_the_host_and_their_bf16_decoding_bit_for_bit() {
    let Some(ctx) = common::gpu("moe mxfp4") else {
        return;
    };
    let layer = random_layer(38, DIMS, TOKENS);
    let (all, ids) = run_layer(&ctx, &layer, ExpertFormat::Mxfp4, TOKENS, 8);
    let k = DIMS.top_k;
    for t in 0..TOKENS {
        let want: Vec<i32> = host_route(&layer, t).iter().map(|c| c.0 as i32).collect();
        assert_eq!(&ids[t * k..(t + 1) * k], &want[..], "token {t}'s experts");
    }
    let decoded = [&layer.gate, &layer.up, &layer.down].map(|b| decode(layer.dtype, b));
    let want: Vec<f64> = (0..TOKENS)
        .flat_map(|t| host_mlp(&layer, &decoded, t))
        .collect();
    common::check("mxfp4 experts vs f64 host", &all, &want, 2e-3);
    assert_same_as_bf16_at_every_size(&ctx, &layer, ExpertFormat::Mxfp4, &all);
}
