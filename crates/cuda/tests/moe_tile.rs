//! The experts' tiled products for prefill-sized steps (kernels/moe_tile.cu): items of 128
//! rows of one expert through 128 x 128 shared-memory tiles, bf16 and MXFP4 weights.
//!
//! Oracles: a host reference in f64 (the same experts; outputs to 2e-3), and the skinny
//! kernels (moe_experts.cu, items of 8 and 32 rows): the tiles sum in their order, so every
//! token's output is the same bit for bit whichever kernel ran, and the MXFP4 tiles the same
//! as the tiles over the host's bf16 decoding of the blocks. The shape makes experts get
//! several full items and partial ones, k split in two parts (1,152 = 9 blocks of 128), a
//! gate/up width (352) that is not whole 64-column tiles and a down k that is not whole
//! 128-element blocks.

mod common;

use common::experts::{decode, host_mlp, random_layer, run_layer, same_bits, Dims};
use ferrite_cuda::launchers::ExpertFormat;

const DIMS: Dims = Dims {
    hidden: 1152,
    width: 352,
    experts: 4,
    top_k: 2,
};
/// About 150 rows an expert: one full item of 128 and a partial one each.
const TOKENS: usize = 300;

#[test]
fn tiled_expert_products_match_the_host_and_the_skinny_kernels_bit_for_bit() {
    let Some(ctx) = common::gpu("moe tile") else {
        return;
    };
    let layer = random_layer(41, DIMS, TOKENS);
    let hidden = DIMS.hidden;
    let (tiled, _) = run_layer(&ctx, &layer, ExpertFormat::Mxfp4, TOKENS, 128);
    let decoded = [&layer.gate, &layer.up, &layer.down].map(|b| decode(layer.dtype, b));
    // Every 7th token against the host (the f64 reference is slow in debug builds).
    let picked: Vec<usize> = (0..TOKENS).step_by(7).collect();
    let want: Vec<f64> = picked
        .iter()
        .flat_map(|&t| host_mlp(&layer, &decoded, t))
        .collect();
    let got: Vec<f32> = picked
        .iter()
        .flat_map(|&t| tiled[t * hidden..(t + 1) * hidden].to_vec())
        .collect();
    common::check("tiled mxfp4 experts vs f64 host", &got, &want, 2e-3);
    for format in [ExpertFormat::Mxfp4, ExpertFormat::Bf16] {
        for chunk in [8, 32, 128] {
            let (out, _) = run_layer(&ctx, &layer, format, TOKENS, chunk);
            assert!(
                same_bits(&out, &tiled),
                "{format:?} weights, items of {chunk}: differ from the MXFP4 tiles"
            );
        }
    }
    // A small step through the tiles: a token's output does not depend on its step.
    let (few, _) = run_layer(&ctx, &layer, ExpertFormat::Mxfp4, 5, 128);
    assert!(
        same_bits(&few, &tiled[..5 * hidden]),
        "5 tokens' tiles differ"
    );
}
