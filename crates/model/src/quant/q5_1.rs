//! Q5_1 (GGML): 32 weights in 24 bytes.

use super::q5_0::five_bit;
use super::DType;
use super::Format;
use super::{f16_at, u32_at};

/// d: f16, m: f16, qh: 4 bytes of fifth bits, then 16 bytes of nibbles; weight = q * d + m.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_1,
    name: "Q5_1",
    fields: &[("d", 2), ("m", 2), ("qh", 4), ("qs", 16)],
    ggml_type: Some(7),
    block_len: 32,
    block_bytes: 24,
    random_block: None,
    dequantize: row,
};

/// Decodes one block over its f32 scale and min: `q * d + m`, `q` five bits.
#[inline]
pub fn decode_block(d: f32, m: f32, qh: u32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = x0 as f32 * d + m;
        y[j + 16] = x1 as f32 * d + m;
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        decode_block(f16_at(b, 0), f16_at(b, 2), u32_at(b, 4), &b[8..], y);
    }
}
