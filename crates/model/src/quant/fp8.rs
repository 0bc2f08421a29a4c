//! FP8 (e4m3) in runs of 128 weights with an f32 scale each: 132 bytes.

use super::Format;
use crate::weights::DType;

/// ferrite's own: the run's f32 scale, then 128 e4m3 bytes (crate::fp8); weight = e4m3 * scale.
pub const FORMAT: Format = Format {
    dtype: DType::Fp8,
    name: "FP8",
    fields: &[("scale", 4), ("q", 128)],
    ggml_type: None,
    block_len: 128,
    block_bytes: 132,
    dequantize: crate::dequant::fp8::dequantize_blocks,
    random_block: Some(random_block),
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    // Random e4m3 bytes but the NaN codes (S.1111.111), over values of up to 448: the block's
    // scale makes the largest about 4 s.
    for b in &mut out[4..] {
        if *b & 0x7f == 0x7f {
            *b &= 0xf7;
        }
    }
    out[0..4].copy_from_slice(&(4.0 * s / crate::fp8::E4M3_MAX).to_le_bytes());
}
