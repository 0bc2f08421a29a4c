//! Q4_1 (GGML): 32 weights in 20 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, m: f16, then 16 bytes of 4-bit quants; weight = q * d + m.
pub const FORMAT: Format = Format {
    dtype: DType::Q4_1,
    name: "Q4_1",
    fields: &[("d", 2), ("m", 2), ("qs", 16)],
    ggml_type: Some(3),
    block_len: 32,
    block_bytes: 20,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 8.0));
    out[2..4].copy_from_slice(&f16_bytes(-s));
}
