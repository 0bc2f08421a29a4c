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

use ferrite_model::quant::{q4_0, q4_1, q5_0, q5_1, q8_0};
use ferrite_model::weights::DType;

use super::RowDequantizer;

/// Number of f16 scales at the start of a block of `dtype`, if the kernels repack it: the
/// 32-element formats, whose leading `d` (and `m`) fields widen to f32 (the format's fields,
/// ferrite_model::quant).
fn scales(dtype: DType) -> Option<usize> {
    let format = ferrite_model::quant::format(dtype);
    let leading = |&&(name, bytes): &&(&str, usize)| bytes == 2 && matches!(name, "d" | "m");
    (format.block_len == 32).then(|| format.fields.iter().take_while(leading).count())
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
            let scale = half::f16::from_le_bytes([block[2 * s], block[2 * s + 1]]);
            out.extend_from_slice(&scale.to_f32().to_le_bytes());
        }
        out.extend_from_slice(&block[2 * n..]);
    }
    Some(out)
}

#[inline(always)]
fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

// The scalar decoders of the repacked blocks: the scales read as f32, the rest of each block
// handed to the model crate's block decoders, so the arithmetic is GGML's reference.

fn q4_0_rows(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(32)) {
        q4_0::decode_block(f32_at(b, 0), &b[4..], y);
    }
}

fn q4_1_rows(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        q4_1::decode_block(f32_at(b, 0), f32_at(b, 4), &b[8..], y);
    }
}

fn q5_0_rows(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(32)) {
        q5_0::decode_block(f32_at(b, 0), u32_at(b, 4), &b[8..], y);
    }
}

fn q5_1_rows(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(28).zip(out.chunks_exact_mut(32)) {
        q5_1::decode_block(f32_at(b, 0), f32_at(b, 4), u32_at(b, 8), &b[12..], y);
    }
}

fn q8_0_rows(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(36).zip(out.chunks_exact_mut(32)) {
        q8_0::decode_block(f32_at(b, 0), &b[4..], y);
    }
}

/// The scalar dequantizer of repacked rows of `dtype` (GGML's reference arithmetic).
pub fn portable_dequantizer(dtype: DType) -> Option<RowDequantizer> {
    Some(match dtype {
        DType::Q4_0 => q4_0_rows,
        DType::Q4_1 => q4_1_rows,
        DType::Q5_0 => q5_0_rows,
        DType::Q5_1 => q5_1_rows,
        DType::Q8_0 => q8_0_rows,
        _ => return None,
    })
}
