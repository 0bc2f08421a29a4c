//! FP8 (e4m3) in runs of 128 weights with an f32 scale each: 132 bytes.

use std::sync::LazyLock;

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
    dequantize: dequantize_blocks,
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

/// One e4m3 byte (OCP FP8, "fn": no infinities, S.1111.111 is NaN) as f32 (exact).
pub fn e4m3_to_f32(byte: u8) -> f32 {
    let sign = if byte & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = ((byte >> 3) & 0xf) as i32;
    let mantissa = (byte & 0x7) as f32;
    if exponent == 0xf && byte & 0x7 == 0x7 {
        return f32::NAN;
    }
    if exponent == 0 {
        // Subnormal: 0.m x 2^(1 - 7).
        return sign * mantissa / 8.0 * 2f32.powi(-6);
    }
    sign * (1.0 + mantissa / 8.0) * 2f32.powi(exponent - 7)
}

/// Every e4m3 byte's value.
pub fn e4m3_table() -> &'static [f32; 256] {
    static TABLE: LazyLock<[f32; 256]> =
        LazyLock::new(|| std::array::from_fn(|b| e4m3_to_f32(b as u8)));
    &TABLE
}

/// Dequantizes whole blocks of `bytes` into `out` (`out.len() / 128` blocks): each weight
/// `e4m3 * scale`, one f32 product.
pub fn dequantize_blocks(bytes: &[u8], out: &mut [f32]) {
    let table = e4m3_table();
    for (block, out) in bytes.chunks_exact(132).zip(out.chunks_exact_mut(128)) {
        let scale = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        for (y, &q) in out.iter_mut().zip(&block[4..]) {
            *y = table[q as usize] * scale;
        }
    }
}
