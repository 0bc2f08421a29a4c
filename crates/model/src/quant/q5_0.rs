//! Q5_0 (GGML): 32 weights in 22 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, qh: 4 bytes of fifth bits, then 16 bytes of nibbles; weight = (q - 16) * d.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_0,
    name: "Q5_0",
    fields: &[("d", 2), ("qh", 4), ("qs", 16)],
    ggml_type: Some(6),
    block_len: 32,
    block_bytes: 22,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 8.0));
}
