//! Q2_K (GGML K-quant): 256 weights in 84 bytes.

use super::f16_at;
use super::DType;
use super::Format;

/// 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit quants, d: f16, dmin: f16.
pub const FORMAT: Format = Format {
    dtype: DType::Q2_K,
    name: "Q2_K",
    fields: &[("scales", 16), ("qs", 64), ("d", 2), ("dmin", 2)],
    ggml_type: Some(10),
    block_len: 256,
    block_bytes: 84,
    random_block: None,
    dequantize: row,
};

// Q2_K and Q3_K walk the output in 16-element parts (chunks, not a running index): the CPU
// backend decodes these two types with this code on its hot path, where bounds checks per
// element cost it more than twice the time.
fn decode_block(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    let mut is = 0;
    for (half, y) in y.chunks_exact_mut(128).enumerate() {
        let q = &qs[half * 32..half * 32 + 32];
        for (shift, y) in [0, 2, 4, 6].into_iter().zip(y.chunks_exact_mut(32)) {
            for (part, y) in y.chunks_exact_mut(16).enumerate() {
                let sc = scales[is];
                is += 1;
                let (dl, ml) = (d * (sc & 0x0f) as f32, dmin * (sc >> 4) as f32);
                for (yl, &ql) in y.iter_mut().zip(&q[16 * part..16 * part + 16]) {
                    *yl = dl * ((ql >> shift) & 3) as f32 - ml;
                }
            }
        }
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(84).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
