//! Dequantization of GGML weight blocks to f32, as the CPU kernels read them.
//!
//! Every kernel dequantizes weights through these functions, so a weight element has one
//! f32 value whichever path (decode, prefill, embedding lookup) reads it. This crate holds
//! only the fast paths (SIMD decoders, `decode`) and the kernels' repacked layout (`repack`);
//! the scalar arithmetic is the model crate's one GGML dequantizer
//! (`ferrite_model::dequant`), which the SIMD paths equal bit for bit (tested in `tests`).

#[cfg(target_arch = "x86_64")]
pub(crate) mod decode;
pub mod repack;
#[cfg(target_arch = "x86_64")]
mod simd_rows;

use ferrite_model::dequant;
use ferrite_model::weights::DType;
use thiserror::Error;

pub use ferrite_model::quant::RowDequantizer;

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
        simd_row_dequantizer(crate::simd::detected_isa(), dtype)
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
pub fn simd_row_dequantizer(isa: crate::simd::Isa, dtype: DType) -> Option<RowDequantizer> {
    use crate::simd::Isa;
    match isa {
        Isa::Avx512 => simd_rows::avx512_rows(dtype),
        Isa::Avx2Fma => simd_rows::avx2_rows(dtype),
        Isa::Portable => None,
    }
}

/// The scalar dequantizer for rows of `dtype` as GGML stores them: the model crate's, the
/// reference the SIMD ones must equal. Q8_K is ggml's intermediate format for activations,
/// not a weight type, so the CPU backend refuses it.
pub fn portable_row_dequantizer(dtype: DType) -> Result<RowDequantizer, QuantError> {
    match dtype {
        DType::Q8_K => Err(QuantError::Unsupported(dtype)),
        _ => Ok(dequant::row_dequantizer(dtype)),
    }
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

#[cfg(test)]
mod tests;
