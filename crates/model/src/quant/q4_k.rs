//! Q4_K (GGML K-quant): 256 weights in 144 bytes.

use super::f16_at;
use super::f16_bytes;
use super::DType;
use super::Format;

/// d: f16, dmin: f16, 12 bytes of packed 6-bit scales and mins, 128 bytes of 4-bit quants.
pub const FORMAT: Format = Format {
    dtype: DType::Q4_K,
    name: "Q4_K",
    fields: &[("d", 2), ("dmin", 2), ("scales", 12), ("qs", 128)],
    ggml_type: Some(12),
    block_len: 256,
    block_bytes: 144,
    random_block: Some(random_block),
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    out[0..2].copy_from_slice(&f16_bytes(s / 256.0));
    out[2..4].copy_from_slice(&f16_bytes(s / 64.0));
}

/// Scale and min `j` (0..8) of a Q4_K/Q5_K block, six bits each, packed in 12 bytes.
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Scales and mins `d·sc`, `dmin·m` of the two sub-blocks of 32-byte chunk `chunk` (0..4).
#[inline(always)]
pub(super) fn chunk_scales(chunk: usize, scales: &[u8], d: f32, dmin: f32) -> (f32, f32, f32, f32) {
    let (sc1, m1) = scale_min_k4(2 * chunk, scales);
    let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
    (
        d * sc1 as f32,
        dmin * m1 as f32,
        d * sc2 as f32,
        dmin * m2 as f32,
    )
}

fn decode_block(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for (chunk, q) in qs.chunks_exact(32).enumerate() {
        let (d1, min1, d2, min2) = chunk_scales(chunk, scales, d, dmin);
        let y = &mut y[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            y[l] = d1 * (q[l] & 0x0f) as f32 - min1;
            y[l + 32] = d2 * (q[l] >> 4) as f32 - min2;
        }
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(144).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
