//! Dequantization of whole rows and tensors to f32, checked: the entry point over each
//! format's scalar reference dequantizer (`crate::quant`, one file per format).

use crate::quant::{format, DType, RowDequantizer};
use crate::weights::WeightTensor;

/// The reference dequantizer of rows of `dtype` as GGML stores them. It decodes whole blocks
/// and does not check lengths; [`dequantize_row`] is the checked entry point.
pub fn row_dequantizer(dtype: DType) -> RowDequantizer {
    format(dtype).dequantize
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

#[cfg(test)]
mod tests;
