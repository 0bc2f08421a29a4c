//! Dequantization of GGML weight blocks to f32.
//!
//! Every kernel dequantizes weights through these functions, so a weight element has one
//! f32 value whichever path (decode, prefill, embedding lookup) reads it. The arithmetic is
//! written as separate multiply and add (never fused) to match ggml's reference dequantizers.

#[cfg(target_arch = "x86_64")]
pub(crate) mod decode;
mod float;
mod kquants;
mod q4;
mod q5;
mod q8;
pub mod repack;
#[cfg(target_arch = "x86_64")]
mod simd_rows;

use ferrite_model::weights::DType;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantError {
    #[error("weight type {0:?} is not supported by the CPU backend")]
    Unsupported(DType),
    #[error("a row of {cols} elements is not a whole number of {dtype:?} blocks")]
    RaggedRow { dtype: DType, cols: usize },
    #[error("{dtype:?} row of {cols} elements needs {expected} bytes, got {got}")]
    WrongByteCount {
        dtype: DType,
        cols: usize,
        expected: usize,
        got: usize,
    },
}

/// Dequantizes whole blocks: `bytes` holds `out.len() / block_len` blocks.
pub type RowDequantizer = fn(bytes: &[u8], out: &mut [f32]);

/// The dequantizer for rows of `dtype` as GGML stores them: the SIMD one for this machine
/// where there is one (K-quants and floats; the 32-element types are decoded by SIMD only in
/// the kernels' repacked layout).
pub fn row_dequantizer(dtype: DType) -> Result<RowDequantizer, QuantError> {
    if !repack::is_repacked(dtype) {
        if let Some(simd) = detected_simd_rows(dtype) {
            return Ok(simd);
        }
    }
    portable_row_dequantizer(dtype)
}

/// The dequantizer for rows of `dtype` in the kernels' layout (`repack` for the 32-element
/// types, GGML's otherwise): SIMD where this machine has it.
pub fn kernel_row_dequantizer(dtype: DType) -> Result<RowDequantizer, QuantError> {
    if let Some(simd) = detected_simd_rows(dtype) {
        return Ok(simd);
    }
    portable_kernel_row_dequantizer(dtype)
}

/// The scalar dequantizer for rows of `dtype` in the kernels' layout.
pub fn portable_kernel_row_dequantizer(dtype: DType) -> Result<RowDequantizer, QuantError> {
    match repack::portable_dequantizer(dtype) {
        Some(repacked) => Ok(repacked),
        None => portable_row_dequantizer(dtype),
    }
}

fn detected_simd_rows(dtype: DType) -> Option<RowDequantizer> {
    #[cfg(target_arch = "x86_64")]
    {
        simd_row_dequantizer(crate::kernels::simd::detected_isa(), dtype)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = dtype;
        None
    }
}

/// The SIMD dequantizer of `dtype` (kernels' layout) for `isa`, if there is one (tests compare
/// it with the scalar one). Only call the result when `isa` is available.
#[cfg(target_arch = "x86_64")]
pub fn simd_row_dequantizer(
    isa: crate::kernels::simd::Isa,
    dtype: DType,
) -> Option<RowDequantizer> {
    use crate::kernels::simd::Isa;
    match isa {
        Isa::Avx512 => simd_rows::avx512_rows(dtype),
        Isa::Avx2Fma => simd_rows::avx2_rows(dtype),
        Isa::Portable => None,
    }
}

/// The scalar dequantizer for rows of `dtype` (the reference the SIMD ones must equal).
pub fn portable_row_dequantizer(dtype: DType) -> Result<RowDequantizer, QuantError> {
    Ok(match dtype {
        DType::F32 => float::dequantize_f32,
        DType::F16 => float::dequantize_f16,
        DType::BF16 => float::dequantize_bf16,
        DType::Q4_0 => q4::dequantize_q4_0,
        DType::Q4_1 => q4::dequantize_q4_1,
        DType::Q5_0 => q5::dequantize_q5_0,
        DType::Q5_1 => q5::dequantize_q5_1,
        DType::Q8_0 => q8::dequantize_q8_0,
        DType::Q2_K => kquants::dequantize_q2_k,
        DType::Q3_K => kquants::dequantize_q3_k,
        DType::Q4_K => kquants::dequantize_q4_k,
        DType::Q5_K => kquants::dequantize_q5_k,
        DType::Q6_K => kquants::dequantize_q6_k,
        DType::Q8_K => return Err(QuantError::Unsupported(dtype)),
    })
}

/// Checks that `bytes` is exactly one row of `cols` elements of `dtype`.
pub fn check_row(dtype: DType, cols: usize, bytes: usize) -> Result<(), QuantError> {
    if cols % dtype.block_len() != 0 {
        return Err(QuantError::RaggedRow { dtype, cols });
    }
    let expected = dtype.row_bytes(cols);
    if bytes != expected {
        return Err(QuantError::WrongByteCount {
            dtype,
            cols,
            expected,
            got: bytes,
        });
    }
    Ok(())
}

/// Dequantizes one row (checked), e.g. an embedding row or a norm vector.
pub fn dequantize_row(dtype: DType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    check_row(dtype, out.len(), bytes.len())?;
    row_dequantizer(dtype)?(bytes, out);
    Ok(())
}

#[inline(always)]
pub(crate) fn f16_at(bytes: &[u8], offset: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[offset], bytes[offset + 1]])).to_f32()
}

#[cfg(test)]
mod tests;
