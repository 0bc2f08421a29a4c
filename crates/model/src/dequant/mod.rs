//! Scalar reference dequantization of every `DType`, following ggml's `dequantize_row_*`
//! (ggml-quants.c). Meant as the oracle for fast kernels and for tests, not for the hot path.

use half::{bf16, f16};

use crate::weights::{DType, WeightTensor};

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Dequantizes `out.len()` elements stored in `bytes`.
///
/// # Panics
/// If `out.len()` is not a multiple of the block length or `bytes` is not exactly
/// `dtype.row_bytes(out.len())` long: that is a caller's bug, not a property of the data.
pub fn dequantize_row(dtype: DType, bytes: &[u8], out: &mut [f32]) {
    let block_len = dtype.block_len();
    assert!(
        out.len() % block_len == 0,
        "{} elements is not a whole number of {dtype:?} blocks",
        out.len()
    );
    assert_eq!(
        bytes.len(),
        dtype.row_bytes(out.len()),
        "{dtype:?}: byte length does not match {} elements",
        out.len()
    );
    let blocks = bytes
        .chunks_exact(dtype.block_bytes())
        .zip(out.chunks_exact_mut(block_len));
    for (b, y) in blocks {
        match dtype {
            DType::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::F16 => y[0] = f16_at(b, 0),
            DType::BF16 => y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            DType::Q4_0 => q4_0(b, y),
            DType::Q4_1 => q4_1(b, y),
            DType::Q5_0 => q5_0(b, y),
            DType::Q5_1 => q5_1(b, y),
            DType::Q8_0 => q8_0(b, y),
            DType::Q2_K => q2_k(b, y),
            DType::Q3_K => q3_k(b, y),
            DType::Q4_K => q4_k(b, y),
            DType::Q5_K => q5_k(b, y),
            DType::Q6_K => q6_k(b, y),
            DType::Q8_K => q8_k(b, y),
        }
    }
}

/// A whole tensor as f32, row-major.
pub fn dequantize(tensor: &WeightTensor) -> Vec<f32> {
    let numel: usize = tensor.shape.iter().product();
    let mut out = vec![0.0; numel];
    dequantize_row(tensor.dtype, tensor.storage.bytes(), &mut out);
    out
}

fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// The 5-bit values of a Q5_0/Q5_1 block: low nibbles in `qs`, fifth bits in `qh`.
fn five_bit(qh: u32, qs: &[u8], j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) << 4) & 0x10;
    let h1 = (qh >> (j + 12)) & 0x10;
    (
        ((qs[j] as u32 & 0x0f) | h0) as i32,
        (((qs[j] as u32) >> 4) | h1) as i32,
    )
}

fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = (x0 - 16) as f32 * d;
        y[j + 16] = (x1 - 16) as f32 * d;
    }
}

fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = x0 as f32 * d + m;
        y[j + 16] = x1 as f32 * d + m;
    }
}

fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (yj, &q) in y.iter_mut().zip(&b[2..34]) {
        *yj = q as i8 as f32 * d;
    }
}

fn q2_k(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    let mut out = 0;
    let mut is = 0;
    for half in 0..2 {
        let q = &qs[half * 32..half * 32 + 32];
        for shift in [0, 2, 4, 6] {
            for part in 0..2 {
                let sc = scales[is];
                is += 1;
                let (dl, ml) = (d * (sc & 0x0f) as f32, dmin * (sc >> 4) as f32);
                for l in 0..16 {
                    y[out] = dl * ((q[l + 16 * part] >> shift) & 3) as f32 - ml;
                    out += 1;
                }
            }
        }
    }
}

fn q3_k(b: &[u8], y: &mut [f32]) {
    let (hmask, qs, packed) = (&b[0..32], &b[32..96], &b[96..108]);
    let d_all = f16_at(b, 108);
    // 16 six-bit scales: low 4 bits in bytes 0..8, high 2 bits in bytes 8..12.
    let mut scales = [0i32; 16];
    for (i, s) in scales.iter_mut().enumerate() {
        let low = if i < 8 {
            packed[i] & 0x0f
        } else {
            packed[i - 8] >> 4
        };
        let high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
        *s = (low | (high << 4)) as i32 - 32;
    }
    let mut out = 0;
    let mut is = 0;
    let mut m = 1u8;
    for half in 0..2 {
        let q = &qs[half * 32..half * 32 + 32];
        for shift in [0, 2, 4, 6] {
            for part in 0..2 {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for l in 0..16 {
                    let i = l + 16 * part;
                    let low = ((q[i] >> shift) & 3) as i32;
                    let sub = if hmask[i] & m != 0 { 0 } else { 4 };
                    y[out] = dl * (low - sub) as f32;
                    out += 1;
                }
            }
            m <<= 1;
        }
    }
}

/// Scale and min `j` (0..8) of a Q4_K/Q5_K block, six bits each, packed in 12 bytes.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for (chunk, q) in qs.chunks_exact(32).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * chunk, scales);
        let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (d1, min1, d2, min2) = (
            d * sc1 as f32,
            dmin * m1 as f32,
            d * sc2 as f32,
            dmin * m2 as f32,
        );
        let y = &mut y[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            y[l] = d1 * (q[l] & 0x0f) as f32 - min1;
            y[l + 32] = d2 * (q[l] >> 4) as f32 - min2;
        }
    }
}

fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for (chunk, ql) in qs.chunks_exact(32).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * chunk, scales);
        let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (d1, min1, d2, min2) = (
            d * sc1 as f32,
            dmin * m1 as f32,
            d * sc2 as f32,
            dmin * m2 as f32,
        );
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

fn q6_k(b: &[u8], y: &mut [f32]) {
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

fn q8_k(b: &[u8], y: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (yj, &q) in y.iter_mut().zip(&b[4..260]) {
        *yj = q as i8 as f32 * d;
    }
}

#[cfg(test)]
mod tests;
