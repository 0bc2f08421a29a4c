//! MXFP4 (OCP microscaling FP4, GGML's type 39; gpt-oss's experts): 32 weights in 17 bytes.

use super::DType;
use super::Format;

/// e: an E8M0 exponent (byte 0), then 16 bytes of 4-bit E2M1 codes; weight =
/// `E2M1[code] * 2^(e - 127)`. Element `j` (0..16) is the low nibble of byte `j`, element
/// `j + 16` its high nibble (GGML's order; Hugging Face checkpoints pair neighbours, and their
/// reader re-lays them into this).
pub const FORMAT: Format = Format {
    dtype: DType::Mxfp4,
    name: "MXFP4",
    fields: &[("e", 1), ("qs", 16)],
    ggml_type: Some(39),
    block_len: 32,
    block_bytes: 17,
    random_block: Some(random_block),
    dequantize: row,
};

/// The E2M1 values of the 16 codes: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6.
pub const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// `2^(e - 127)` exactly (e = 0 is 2^-127, a subnormal f32; 255 is NaN in the spec and
/// decodes to 2^128 = inf here).
#[inline]
pub fn e8m0(e: u8) -> f32 {
    if e == 0 {
        f32::from_bits(0x0040_0000)
    } else {
        f32::from_bits((e as u32) << 23)
    }
}

/// A random block's scale for weights of about `s` (codes average about 2.6 in size).
fn random_block(s: f32, out: &mut [u8]) {
    let e = ((s / 2.6).max(f32::MIN_POSITIVE).log2().round() as i32 + 127).clamp(1, 254);
    out[0] = e as u8;
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(17).zip(out.chunks_exact_mut(32)) {
        let d = e8m0(b[0]);
        for j in 0..16 {
            y[j] = E2M1[(b[1 + j] & 0x0f) as usize] * d;
            y[j + 16] = E2M1[(b[1 + j] >> 4) as usize] * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers: codes 1 (0.5) and 15 (-6) under exponents 127 (x1), 128 (x2), 120.
    #[test]
    fn decodes_known_blocks() {
        let mut block = [0u8; 17];
        block[0] = 128;
        block[1] = 0xf1; // element 0: 0.5 * 2, element 16: -6 * 2
        let mut y = [0.0f32; 32];
        row(&block, &mut y);
        assert_eq!((y[0], y[16], y[1]), (1.0, -12.0, 0.0));
        assert_eq!(e8m0(127), 1.0);
        assert_eq!(e8m0(120), 1.0 / 128.0);
        assert_eq!(e8m0(0), 2f32.powi(-127));
    }
}
