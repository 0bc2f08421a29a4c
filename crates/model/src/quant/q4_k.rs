//! Q4_K (GGML K-quant): 256 weights in 144 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, dmin: f16, 12 bytes of packed 6-bit scales and mins, 128 bytes of 4-bit quants.
pub const FORMAT: Format = Format {
    dtype: DType::Q4_K,
    name: "Q4_K",
    fields: &[("d", 2), ("dmin", 2), ("scales", 12), ("qs", 128)],
    ggml_type: Some(12),
    block_len: 256,
    block_bytes: 144,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 256.0));
    out[2..4].copy_from_slice(&f16_bytes(s / 64.0));
}
