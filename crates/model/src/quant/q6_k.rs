//! Q6_K (GGML K-quant): 256 weights in 210 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;

/// 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 signed 8-bit sub-block scales, d: f16.
pub const FORMAT: Format = Format {
    dtype: DType::Q6_K,
    name: "Q6_K",
    fields: &[("ql", 128), ("qh", 64), ("scales", 16), ("d", 2)],
    ggml_type: Some(14),
    block_len: 256,
    block_bytes: 210,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    // Signed 8-bit sub-block scales kept within ±32.
    for b in &mut out[192..208] {
        *b = ((*b as i8) / 4) as u8;
    }
    out[208..210].copy_from_slice(&f16_bytes(s / 512.0));
}
