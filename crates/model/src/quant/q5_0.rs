//! Q5_0 (GGML): 32 weights in 22 bytes.

use super::f16_bytes;
use super::DType;
use super::Format;
use super::{f16_at, u32_at};

/// d: f16, qh: 4 bytes of fifth bits, then 16 bytes of nibbles; weight = (q - 16) * d.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_0,
    name: "Q5_0",
    fields: &[("d", 2), ("qh", 4), ("qs", 16)],
    ggml_type: Some(6),
    block_len: 32,
    block_bytes: 22,
    random_block: Some(random_block),
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 8.0));
}

/// Decodes one block over its f32 scale: `(q - 16) * d`, `q` five bits (`five_bit`).
#[inline]
pub fn decode_block(d: f32, qh: u32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = (x0 - 16) as f32 * d;
        y[j + 16] = (x1 - 16) as f32 * d;
    }
}

/// The 5-bit values `j` and `j + 16` of a Q5_0/Q5_1 block: nibbles in `qs`, fifth bits in
/// `qh` (bit `j` for element `j`).
#[inline(always)]
pub(super) fn five_bit(qh: u32, qs: &[u8], j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) << 4) & 0x10;
    let h1 = (qh >> (j + 12)) & 0x10;
    (
        ((qs[j] as u32 & 0x0f) | h0) as i32,
        (((qs[j] as u32) >> 4) | h1) as i32,
    )
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(22).zip(out.chunks_exact_mut(32)) {
        decode_block(f16_at(b, 0), u32_at(b, 2), &b[6..], y);
    }
}
