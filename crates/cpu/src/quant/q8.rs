//! Q8_0: an f16 scale and 32 signed bytes.

use super::f16_at;

const Q8_0_BYTES: usize = 34;

pub fn dequantize_q8_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(Q8_0_BYTES).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(block, 0);
        for (o, &q) in y.iter_mut().zip(&block[2..34]) {
            *o = (q as i8) as f32 * d;
        }
    }
}
