//! FP8 (e4m3) decoding: one byte as f32, and rows of ferrite's FP8 blocks ([`DType::Fp8`]:
//! the f32 scale, then 128 e4m3 bytes; `crate::fp8` has the layout and the encoder).

use std::sync::LazyLock;

use crate::weights::DType;

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

/// Dequantizes whole [`DType::Fp8`] blocks of `bytes` into `out` (`out.len() / 128` blocks):
/// each weight `e4m3 * scale`, one f32 product.
pub fn dequantize_blocks(bytes: &[u8], out: &mut [f32]) {
    let table = e4m3_table();
    let (len, size) = (DType::Fp8.block_len(), DType::Fp8.block_bytes());
    for (block, out) in bytes.chunks_exact(size).zip(out.chunks_exact_mut(len)) {
        let scale = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        for (y, &q) in out.iter_mut().zip(&block[4..]) {
            *y = table[q as usize] * scale;
        }
    }
}
