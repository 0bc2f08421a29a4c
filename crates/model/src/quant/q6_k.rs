//! Q6_K (GGML K-quant): 256 weights in 210 bytes.

use super::f16_at;
use super::f16_bytes;
use super::DType;
use super::Format;

/// 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 signed 8-bit sub-block scales, d: f16.
pub const FORMAT: Format = Format {
    dtype: DType::Q6_K,
    name: "Q6_K",
    fields: &[("ql", 128), ("qh", 64), ("scales", 16), ("d", 2)],
    ggml_type: Some(14),
    block_len: 256,
    block_bytes: 210,
    random_block: Some(random_block),
    dequantize: row,
};

/// A random block's scale fields for weights of about `s` (the rest stays random).
fn random_block(s: f32, out: &mut [u8]) {
    // Signed 8-bit sub-block scales kept within ±32.
    for b in &mut out[192..208] {
        *b = ((*b as i8) / 4) as u8;
    }
    out[208..210].copy_from_slice(&f16_bytes(s / 512.0));
}

fn decode_block(b: &[u8], y: &mut [f32]) {
    let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for half in 0..2 {
        let (ql, qh, sc) = (&ql[half * 64..], &qh[half * 32..], &sc[half * 8..]);
        let y = &mut y[half * 128..half * 128 + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(210).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
