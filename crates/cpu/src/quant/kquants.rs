//! K-quants: 256-element super-blocks with 16 or 8 sub-block scales (ggml-quants.c's
//! `dequantize_row_q*_K`, followed operation for operation).

use super::f16_at;

const Q2_K_BYTES: usize = 84;
const Q3_K_BYTES: usize = 110;
const Q4_K_BYTES: usize = 144;
const Q5_K_BYTES: usize = 176;
const Q6_K_BYTES: usize = 210;

/// The 6-bit scale and min of sub-block `j` packed in Q4_K/Q5_K's 12 scale bytes.
#[inline(always)]
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

pub fn dequantize_q2_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes
        .chunks_exact(Q2_K_BYTES)
        .zip(out.chunks_exact_mut(256))
    {
        let scales = &block[0..16];
        let d = f16_at(block, 80);
        let dmin = f16_at(block, 82);
        let mut scale_index = 0;
        for (half, y) in y.chunks_exact_mut(128).enumerate() {
            let q = &block[16 + half * 32..16 + half * 32 + 32];
            for (shift_index, y) in y.chunks_exact_mut(32).enumerate() {
                let shift = 2 * shift_index;
                for (part, y) in y.chunks_exact_mut(16).enumerate() {
                    let sc = scales[scale_index];
                    scale_index += 1;
                    let dl = d * (sc & 0x0F) as f32;
                    let ml = dmin * (sc >> 4) as f32;
                    for (l, o) in y.iter_mut().enumerate() {
                        *o = dl * ((q[part * 16 + l] >> shift) & 3) as f32 - ml;
                    }
                }
            }
        }
    }
}

/// Q3_K's sixteen 6-bit signed scales, unpacked from 12 bytes.
fn q3_k_scales(packed: &[u8]) -> [i8; 16] {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let word =
        |i: usize| u32::from_le_bytes([packed[i], packed[i + 1], packed[i + 2], packed[i + 3]]);
    let (a0, a1, tmp) = (word(0), word(4), word(8));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut scales = [0i8; 16];
    for (i, s) in scales.iter_mut().enumerate() {
        *s = aux[i / 4].to_le_bytes()[i % 4] as i8;
    }
    scales
}

pub fn dequantize_q3_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes
        .chunks_exact(Q3_K_BYTES)
        .zip(out.chunks_exact_mut(256))
    {
        let hmask = &block[0..32];
        let scales = q3_k_scales(&block[96..108]);
        let d_all = f16_at(block, 108);
        let mut scale_index = 0;
        let mut mask_bit = 1u8;
        for (half, y) in y.chunks_exact_mut(128).enumerate() {
            let q = &block[32 + half * 32..32 + half * 32 + 32];
            for (shift_index, y) in y.chunks_exact_mut(32).enumerate() {
                let shift = 2 * shift_index;
                for (part, y) in y.chunks_exact_mut(16).enumerate() {
                    let dl = d_all * (scales[scale_index] as i32 - 32) as f32;
                    scale_index += 1;
                    for (l, o) in y.iter_mut().enumerate() {
                        let i = part * 16 + l;
                        let high = if hmask[i] & mask_bit != 0 { 0 } else { 4 };
                        *o = dl * (((q[i] >> shift) & 3) as i32 - high) as f32;
                    }
                }
                mask_bit <<= 1;
            }
        }
    }
}

pub fn dequantize_q4_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes
        .chunks_exact(Q4_K_BYTES)
        .zip(out.chunks_exact_mut(256))
    {
        let d = f16_at(block, 0);
        let dmin = f16_at(block, 2);
        let scales = &block[4..16];
        for (pair, y) in y.chunks_exact_mut(64).enumerate() {
            let q = &block[16 + pair * 32..16 + pair * 32 + 32];
            let (sc1, m1) = scale_min_k4(2 * pair, scales);
            let (sc2, m2) = scale_min_k4(2 * pair + 1, scales);
            let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
            let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
            let (lo, hi) = y.split_at_mut(32);
            for l in 0..32 {
                lo[l] = d1 * (q[l] & 0x0F) as f32 - min1;
                hi[l] = d2 * (q[l] >> 4) as f32 - min2;
            }
        }
    }
}

pub fn dequantize_q5_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes
        .chunks_exact(Q5_K_BYTES)
        .zip(out.chunks_exact_mut(256))
    {
        let d = f16_at(block, 0);
        let dmin = f16_at(block, 2);
        let scales = &block[4..16];
        let qh = &block[16..48];
        for (pair, y) in y.chunks_exact_mut(64).enumerate() {
            let ql = &block[48 + pair * 32..48 + pair * 32 + 32];
            let (sc1, m1) = scale_min_k4(2 * pair, scales);
            let (sc2, m2) = scale_min_k4(2 * pair + 1, scales);
            let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
            let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
            let (u1, u2) = (1u8 << (2 * pair), 2u8 << (2 * pair));
            let (lo, hi) = y.split_at_mut(32);
            for l in 0..32 {
                let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
                lo[l] = d1 * ((ql[l] & 0x0F) + h1) as f32 - min1;
                hi[l] = d2 * ((ql[l] >> 4) + h2) as f32 - min2;
            }
        }
    }
}

pub fn dequantize_q6_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes
        .chunks_exact(Q6_K_BYTES)
        .zip(out.chunks_exact_mut(256))
    {
        let d = f16_at(block, 208);
        for (half, y) in y.chunks_exact_mut(128).enumerate() {
            let ql = &block[half * 64..half * 64 + 64];
            let qh = &block[128 + half * 32..128 + half * 32 + 32];
            let sc = &block[192 + half * 8..192 + half * 8 + 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
                y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
                y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
                y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
            }
        }
    }
}
