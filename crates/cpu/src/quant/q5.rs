//! Q5_0 and Q5_1: Q4 nibbles plus a fifth bit per element from a 32-bit mask
//! (bit j for element j, bit j + 16 for element j + 16).

use super::f16_at;

const Q5_0_BYTES: usize = 22;
const Q5_1_BYTES: usize = 24;

#[inline(always)]
fn five_bit_values<const HAS_MIN: bool>(
    qh: u32,
    qs: &[u8],
    lo: &mut [f32],
    hi: &mut [f32],
    d: f32,
    m: f32,
) {
    let offset = if HAS_MIN { 0 } else { 16 };
    for j in 0..16 {
        let high_lo = (((qh >> j) << 4) & 0x10) as u8;
        let high_hi = ((qh >> (j + 12)) & 0x10) as u8;
        let q_lo = ((qs[j] & 0x0F) | high_lo) as i32 - offset;
        let q_hi = ((qs[j] >> 4) | high_hi) as i32 - offset;
        if HAS_MIN {
            lo[j] = q_lo as f32 * d + m;
            hi[j] = q_hi as f32 * d + m;
        } else {
            lo[j] = q_lo as f32 * d;
            hi[j] = q_hi as f32 * d;
        }
    }
}

pub fn dequantize_q5_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(Q5_0_BYTES).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(block, 0);
        let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        let (lo, hi) = y.split_at_mut(16);
        five_bit_values::<false>(qh, &block[6..22], lo, hi, d, 0.0);
    }
}

pub fn dequantize_q5_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(Q5_1_BYTES).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        let qh = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
        let (lo, hi) = y.split_at_mut(16);
        five_bit_values::<true>(qh, &block[8..24], lo, hi, d, m);
    }
}
