//! Q4_0 (GGML): 32 weights in 18 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16 (bytes 0..2), then 16 bytes of 4-bit quants; weight = (q - 8) * d.
pub const FORMAT: Format = Format {
    dtype: DType::Q4_0,
    name: "Q4_0",
    fields: &[("d", 2), ("qs", 16)],
    ggml_type: Some(2),
    block_len: 32,
    block_bytes: 18,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 4.0));
}
