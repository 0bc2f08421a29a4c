//! K-quants: 256-element super-blocks with 16 or 8 sub-block scales, as GGML stores them.

use super::f16_at;

/// `$row`: the row dequantizer applying the block decoder `$block` to every `$bytes`-byte
/// block of a row (one function per type, so that each is a plain `fn` with its decoder inlined).
macro_rules! rows {
    ($($row:ident: $block:ident, $bytes:literal;)*) => {
        $(
            pub(super) fn $row(bytes: &[u8], out: &mut [f32]) {
                for (b, y) in bytes.chunks_exact($bytes).zip(out.chunks_exact_mut(256)) {
                    $block(b, y);
                }
            }
        )*
    };
}

rows! {
    q2_k_row: q2_k, 84;
    q3_k_row: q3_k, 110;
    q4_k_row: q4_k, 144;
    q5_k_row: q5_k, 176;
    q6_k_row: q6_k, 210;
    q8_k_row: q8_k, 292;
}

// Q2_K and Q3_K walk the output in 16-element parts (chunks, not a running index): the
// CPU backend decodes these two types with this code on its hot path, where bounds checks
// per element cost it more than twice the time.

fn q2_k(b: &[u8], y: &mut [f32]) {
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

/// Q3_K's sixteen 6-bit scales (low 4 bits in bytes 0..8, high 2 bits in bytes 8..12),
/// unpacked four at a time as ggml does, offset by 32.
fn q3_k_scales(packed: &[u8]) -> [i32; 16] {
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
    let mut scales = [0i32; 16];
    for (i, s) in scales.iter_mut().enumerate() {
        *s = aux[i / 4].to_le_bytes()[i % 4] as i32 - 32;
    }
    scales
}

fn q3_k(b: &[u8], y: &mut [f32]) {
    let (hmask, qs) = (&b[0..32], &b[32..96]);
    let scales = q3_k_scales(&b[96..108]);
    let d_all = f16_at(b, 108);
    let mut is = 0;
    let mut m = 1u8;
    for (half, y) in y.chunks_exact_mut(128).enumerate() {
        let q = &qs[half * 32..half * 32 + 32];
        for (shift, y) in [0, 2, 4, 6].into_iter().zip(y.chunks_exact_mut(32)) {
            for (part, y) in y.chunks_exact_mut(16).enumerate() {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for (l, yl) in y.iter_mut().enumerate() {
                    let i = part * 16 + l;
                    let sub = if hmask[i] & m != 0 { 0 } else { 4 };
                    *yl = dl * (((q[i] >> shift) & 3) as i32 - sub) as f32;
                }
            }
            m <<= 1;
        }
    }
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
fn chunk_scales(chunk: usize, scales: &[u8], d: f32, dmin: f32) -> (f32, f32, f32, f32) {
    let (sc1, m1) = scale_min_k4(2 * chunk, scales);
    let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
    (
        d * sc1 as f32,
        dmin * m1 as f32,
        d * sc2 as f32,
        dmin * m2 as f32,
    )
}

fn q4_k(b: &[u8], y: &mut [f32]) {
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

fn q5_k(b: &[u8], y: &mut [f32]) {
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
