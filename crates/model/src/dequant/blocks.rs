//! The 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), one block at a time over scales
//! already read as f32, plus the row loops over GGML's layout (f16 scales first).
//!
//! Widening an f16 scale to f32 is exact, so a backend that keeps these blocks with f32 scales
//! gets from these functions the very values GGML's bytes give. In every block, element `j`
//! (0..16) is the low nibble of quant byte `j` and element `j + 16` its high nibble.

use super::f16_at;

/// Q4_0: `(q - 8) * d` for the 16 bytes `qs` of 4-bit quants.
#[inline]
pub fn q4_0(d: f32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// Q4_1: `q * d + m`.
#[inline]
pub fn q4_1(d: f32, m: f32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// The 5-bit values `j` and `j + 16` of a Q5_0/Q5_1 block: nibbles in `qs`, fifth bits in
/// `qh` (bit `j` for element `j`).
#[inline(always)]
fn five_bit(qh: u32, qs: &[u8], j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) << 4) & 0x10;
    let h1 = (qh >> (j + 12)) & 0x10;
    (
        ((qs[j] as u32 & 0x0f) | h0) as i32,
        (((qs[j] as u32) >> 4) | h1) as i32,
    )
}

/// Q5_0: `(q - 16) * d`, `q` five bits.
#[inline]
pub fn q5_0(d: f32, qh: u32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = (x0 - 16) as f32 * d;
        y[j + 16] = (x1 - 16) as f32 * d;
    }
}

/// Q5_1: `q * d + m`, `q` five bits.
#[inline]
pub fn q5_1(d: f32, m: f32, qh: u32, qs: &[u8], y: &mut [f32]) {
    let (qs, y) = (&qs[..16], &mut y[..32]);
    for j in 0..16 {
        let (x0, x1) = five_bit(qh, qs, j);
        y[j] = x0 as f32 * d + m;
        y[j + 16] = x1 as f32 * d + m;
    }
}

/// Q8_0: `q * d` for 32 signed bytes.
#[inline]
pub fn q8_0(d: f32, qs: &[u8], y: &mut [f32]) {
    for (yj, &q) in y[..32].iter_mut().zip(&qs[..32]) {
        *yj = q as i8 as f32 * d;
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn q4_0_row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
        q4_0(f16_at(b, 0), &b[2..], y);
    }
}

pub(super) fn q4_1_row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(32)) {
        q4_1(f16_at(b, 0), f16_at(b, 2), &b[4..], y);
    }
}

pub(super) fn q5_0_row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(22).zip(out.chunks_exact_mut(32)) {
        q5_0(f16_at(b, 0), u32_at(b, 2), &b[6..], y);
    }
}

pub(super) fn q5_1_row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        q5_1(f16_at(b, 0), f16_at(b, 2), u32_at(b, 4), &b[8..], y);
    }
}

pub(super) fn q8_0_row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(34).zip(out.chunks_exact_mut(32)) {
        q8_0(f16_at(b, 0), &b[2..], y);
    }
}
