//! Q8_0 (GGML): 32 weights in 34 bytes.

use super::f16_at;
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
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 64.0));
}

/// Decodes one block over its f32 scale: `q * d` for 32 signed bytes.
#[inline]
pub fn decode_block(d: f32, qs: &[u8], y: &mut [f32]) {
    for (yj, &q) in y[..32].iter_mut().zip(&qs[..32]) {
        *yj = q as i8 as f32 * d;
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(34).zip(out.chunks_exact_mut(32)) {
        decode_block(f16_at(b, 0), &b[2..], y);
    }
}
