//! Q8_0 (GGML): 32 weights in 34 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, then 32 signed bytes; weight = q * d.
pub const FORMAT: Format = Format {
    dtype: DType::Q8_0,
    name: "Q8_0",
    fields: &[("d", 2), ("qs", 32)],
    ggml_type: Some(8),
    block_len: 32,
    block_bytes: 34,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 64.0));
}
