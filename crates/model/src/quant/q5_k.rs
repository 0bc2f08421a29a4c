//! Q5_K (GGML K-quant): 256 weights in 176 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, dmin: f16, 12 bytes of packed 6-bit scales and mins, 32 bytes of fifth bits, 128 bytes of nibbles.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_K,
    name: "Q5_K",
    fields: &[
        ("d", 2),
        ("dmin", 2),
        ("scales", 12),
        ("qh", 32),
        ("qs", 128),
    ],
    ggml_type: Some(13),
    block_len: 256,
    block_bytes: 176,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 256.0));
    out[2..4].copy_from_slice(&f16_bytes(s / 64.0));
}
