//! The 32-element GGML blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) re-laid for the kernels, with
//! their f16 scales widened to f32 once at load.
//!
//! Decoding such a block spends most of its instructions, and its longest dependency chain,
//! on turning two f16 scales into broadcast f32 registers; with f32 scales in memory a kernel
//! broadcasts them straight into its arithmetic. Widening f16 to f32 is exact, so every weight
//! keeps the value the GGML bytes give it. Layouts (little-endian, scales first, the rest of
//! the block as GGML has it):
//!
//! | type | GGML | repacked |
//! | --- | --- | --- |
//! | Q4_0 | d:f16 qs:16 (18 B) | d:f32 qs:16 (20 B) |
//! | Q4_1 | d:f16 m:f16 qs:16 (20 B) | d:f32 m:f32 qs:16 (24 B) |
//! | Q5_0 | d:f16 qh:4 qs:16 (22 B) | d:f32 qh:4 qs:16 (24 B) |
//! | Q5_1 | d:f16 m:f16 qh:4 qs:16 (24 B) | d:f32 m:f32 qh:4 qs:16 (28 B) |
//! | Q8_0 | d:f16 qs:32 (34 B) | d:f32 qs:32 (36 B) |

use ferrite_model::weights::DType;

use super::{f16_at, RowDequantizer};

/// Number of f16 scales at the start of a block of `dtype`, if the kernels repack it.
fn scales(dtype: DType) -> Option<usize> {
    match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => Some(1),
        DType::Q4_1 | DType::Q5_1 => Some(2),
        _ => None,
    }
}

/// Whether the kernels read `dtype` repacked.
pub fn is_repacked(dtype: DType) -> bool {
    scales(dtype).is_some()
}

/// Bytes of one repacked block (the GGML size for types that are not repacked).
pub fn block_bytes(dtype: DType) -> usize {
    dtype.block_bytes() + 2 * scales(dtype).unwrap_or(0)
}

/// Bytes of a row of `cols` elements as the kernels store it.
pub fn row_bytes(dtype: DType, cols: usize) -> usize {
    cols / dtype.block_len() * block_bytes(dtype)
}

/// `ggml` (whole blocks of `dtype`) re-laid with f32 scales; `None` for other types.
pub fn repack(dtype: DType, ggml: &[u8]) -> Option<Vec<u8>> {
    let n = scales(dtype)?;
    let (from, to) = (dtype.block_bytes(), block_bytes(dtype));
    let mut out = Vec::with_capacity(ggml.len() / from * to);
    for block in ggml.chunks_exact(from) {
        for s in 0..n {
            out.extend_from_slice(&f16_at(block, 2 * s).to_le_bytes());
        }
        out.extend_from_slice(&block[2 * n..]);
    }
    Some(out)
}

#[inline(always)]
fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Q5's fifth bits: element `j` of the block takes bit `j` of `qh`.
#[inline(always)]
fn fifth(qh: u32, j: usize) -> u8 {
    (((qh >> j) & 1) << 4) as u8
}

fn q4_0(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(32)) {
        let d = f32_at(b, 0);
        for j in 0..16 {
            y[j] = ((b[4 + j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + 16] = ((b[4 + j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

fn q4_1(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        let (d, m) = (f32_at(b, 0), f32_at(b, 4));
        for j in 0..16 {
            y[j] = (b[8 + j] & 0x0F) as f32 * d + m;
            y[j + 16] = (b[8 + j] >> 4) as f32 * d + m;
        }
    }
}

fn q5_0(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        let (d, qh) = (f32_at(b, 0), u32::from_le_bytes([b[4], b[5], b[6], b[7]]));
        for j in 0..16 {
            y[j] = (((b[8 + j] & 0x0F) | fifth(qh, j)) as i32 - 16) as f32 * d;
            y[j + 16] = (((b[8 + j] >> 4) | fifth(qh, j + 16)) as i32 - 16) as f32 * d;
        }
    }
}

fn q5_1(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(28).zip(out.chunks_exact_mut(32)) {
        let (d, m) = (f32_at(b, 0), f32_at(b, 4));
        let qh = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        for j in 0..16 {
            y[j] = ((b[12 + j] & 0x0F) | fifth(qh, j)) as f32 * d + m;
            y[j + 16] = ((b[12 + j] >> 4) | fifth(qh, j + 16)) as f32 * d + m;
        }
    }
}

fn q8_0(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(36).zip(out.chunks_exact_mut(32)) {
        let d = f32_at(b, 0);
        for (o, &q) in y.iter_mut().zip(&b[4..36]) {
            *o = (q as i8) as f32 * d;
        }
    }
}

/// The scalar dequantizer of repacked rows of `dtype` (same arithmetic as GGML's reference).
pub fn portable_dequantizer(dtype: DType) -> Option<RowDequantizer> {
    Some(match dtype {
        DType::Q4_0 => q4_0,
        DType::Q4_1 => q4_1,
        DType::Q5_0 => q5_0,
        DType::Q5_1 => q5_1,
        DType::Q8_0 => q8_0,
        _ => return None,
    })
}
