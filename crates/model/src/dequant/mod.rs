//! Scalar dequantization of every `DType`, following ggml's `dequantize_row_*`
//! (ggml-quants.c) operation for operation: separate multiplies and adds, never fused.
//!
//! This is ferrite's one scalar GGML dequantizer. It is the reference the backends' fast paths
//! are tested against bit for bit, and the CPU backend's portable path: the 32-element formats
//! are exposed block by block over already decoded scales ([`blocks`]), so a backend that
//! stores those blocks re-laid (the CPU's f32-scale layout) still decodes them with this code.

pub mod blocks;
pub mod fp8;
mod kquants;

pub use kquants::scale_min_k4;

use half::f16;

use crate::weights::{DType, WeightTensor};

/// Dequantizes whole blocks of one type: `bytes` holds `out.len() / block_len` blocks.
pub type RowDequantizer = fn(bytes: &[u8], out: &mut [f32]);

/// The f16 at byte `at` of `b`, widened to f32 (exact).
#[inline(always)]
pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The dequantizer of rows of `dtype` as GGML stores them. It decodes whole blocks and does
/// not check lengths; [`dequantize_row`] is the checked entry point.
pub fn row_dequantizer(dtype: DType) -> RowDequantizer {
    match dtype {
        DType::F32 => f32_row,
        DType::F16 => f16_row,
        DType::BF16 => bf16_row,
        DType::Q4_0 => blocks::q4_0_row,
        DType::Q4_1 => blocks::q4_1_row,
        DType::Q5_0 => blocks::q5_0_row,
        DType::Q5_1 => blocks::q5_1_row,
        DType::Q8_0 => blocks::q8_0_row,
        DType::Q2_K => kquants::q2_k_row,
        DType::Q3_K => kquants::q3_k_row,
        DType::Q4_K => kquants::q4_k_row,
        DType::Q5_K => kquants::q5_k_row,
        DType::Q6_K => kquants::q6_k_row,
        DType::Q8_K => kquants::q8_k_row,
        DType::Fp8 => fp8::dequantize_blocks,
    }
}

/// Dequantizes `out.len()` elements stored in `bytes`.
///
/// # Panics
/// If `out.len()` is not a multiple of the block length or `bytes` is not exactly
/// `dtype.row_bytes(out.len())` long: that is a caller's bug, not a property of the data.
pub fn dequantize_row(dtype: DType, bytes: &[u8], out: &mut [f32]) {
    assert!(
        out.len() % dtype.block_len() == 0,
        "{} elements is not a whole number of {dtype:?} blocks",
        out.len()
    );
    assert_eq!(
        bytes.len(),
        dtype.row_bytes(out.len()),
        "{dtype:?}: byte length does not match {} elements",
        out.len()
    );
    row_dequantizer(dtype)(bytes, out);
}

/// A whole tensor as f32, row-major.
pub fn dequantize(tensor: &WeightTensor) -> Vec<f32> {
    let numel: usize = tensor.shape.iter().product();
    let mut out = vec![0.0; numel];
    dequantize_row(tensor.dtype, tensor.storage.bytes(), &mut out);
    out
}

fn f32_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

fn f16_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *y = f16_at(b, 0);
    }
}

/// bf16 is the top half of an f32: widened by a shift, as ggml's `ggml_bf16_to_fp32` does
/// (which keeps a NaN's payload as it is, where `half`'s conversion would quiet it).
fn bf16_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *y = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

#[cfg(test)]
mod tests;
