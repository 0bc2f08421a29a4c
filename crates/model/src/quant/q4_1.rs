//! Q4_1 (GGML): 32 weights in 20 bytes.

use super::f16_at;
use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, m: f16, then 16 bytes of 4-bit quants; weight = q * d + m.
pub const FORMAT: Format = Format {
    dtype: DType::Q4_1,
    name: "Q4_1",
    fields: &[("d", 2), ("m", 2), ("qs", 16)],
    ggml_type: Some(3),
    block_len: 32,
    block_bytes: 20,
    random_block: Some(random_block),
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 8.0));
    out[2..4].copy_from_slice(&f16_bytes(-s));
}

/// Decodes one block over its f32 scale and min: `q * d + m`, nibbles as in Q4_0.
#[inline]
pub fn decode_block(d: f32, m: f32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(32)) {
        decode_block(f16_at(b, 0), f16_at(b, 2), &b[4..], y);
    }
}
