//! Q4_0 (GGML): 32 weights in 18 bytes.

use super::f16_at;
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
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 4.0));
}

/// Decodes one block whose scale is already read as f32 (widening an f16 scale is exact, so a
/// backend that keeps these blocks with f32 scales gets GGML's values): element `j` (0..16)
/// is `(q - 8) * d` of the low nibble of byte `j`, element `j + 16` of its high nibble.
#[inline]
pub fn decode_block(d: f32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
        decode_block(f16_at(b, 0), &b[2..], y);
    }
}
