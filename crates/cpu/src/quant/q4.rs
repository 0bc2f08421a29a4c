//! Q4_0 (scale, 32 nibbles offset by 8) and Q4_1 (scale + min, 32 nibbles).
//! Nibble j of a block is the low half of byte j, nibble j + 16 the high half.

use super::f16_at;

const Q4_0_BYTES: usize = 18;
const Q4_1_BYTES: usize = 20;

pub fn dequantize_q4_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(Q4_0_BYTES).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(block, 0);
        let qs: &[u8; 16] = block[2..18].try_into().unwrap_or(&[0; 16]);
        let (lo, hi) = y.split_at_mut(16);
        for j in 0..16 {
            lo[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
            hi[j] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

pub fn dequantize_q4_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(Q4_1_BYTES).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        let qs: &[u8; 16] = block[4..20].try_into().unwrap_or(&[0; 16]);
        let (lo, hi) = y.split_at_mut(16);
        for j in 0..16 {
            lo[j] = (qs[j] & 0x0F) as f32 * d + m;
            hi[j] = (qs[j] >> 4) as f32 * d + m;
        }
    }
}
