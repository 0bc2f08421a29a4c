//! FP8 (e4m3) in runs of 128 weights with an f32 scale each: 132 bytes.

use super::DType;
use super::Format;

/// ferrite's own: the run's f32 scale, then 128 e4m3 bytes (crate::fp8); weight = e4m3 * scale.
pub const FORMAT: Format = Format {
    dtype: DType::Fp8,
    name: "FP8",
    fields: &[("scale", 4), ("q", 128)],
    ggml_type: None,
    block_len: 128,
    block_bytes: 132,
    random_block: Some(random_block),
};

/// The largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    // Random e4m3 bytes but the NaN codes (S.1111.111), over values of up to 448: the block's
    // scale makes the largest about 4 s.
    for b in &mut out[4..] {
        if *b & 0x7f == 0x7f {
            *b &= 0xf7;
        }
    }
    out[0..4].copy_from_slice(&(4.0 * s / E4M3_MAX).to_le_bytes());
}
