//! Q5_K (GGML K-quant): 256 weights in 176 bytes.

use super::f16_at;
use super::f16_bytes;
use super::q4_k::chunk_scales;
use super::DType;
use super::Format;

/// d: f16, dmin: f16, 12 bytes of packed 6-bit scales and mins, 32 bytes of fifth bits, 128 bytes of nibbles.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_K,
    name: "Q5_K",
    fields: &[
        ("d", 2),
        ("dmin", 2),
        ("scales", 12),
        ("qh", 32),
        ("qs", 128),
    ],
    ggml_type: Some(13),
    block_len: 256,
    block_bytes: 176,
    random_block: Some(random_block),
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 256.0));
    out[2..4].copy_from_slice(&f16_bytes(s / 64.0));
}

fn decode_block(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for (chunk, ql) in qs.chunks_exact(32).enumerate() {
        let (d1, min1, d2, min2) = chunk_scales(chunk, scales, d, dmin);
        let (u1, u2) = (1u8 << (2 * chunk), 2u8 << (2 * chunk));
        let y = &mut y[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[l] = d1 * ((ql[l] & 0x0f) + h1) as f32 - min1;
            y[l + 32] = d2 * ((ql[l] >> 4) + h2) as f32 - min2;
        }
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(176).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
