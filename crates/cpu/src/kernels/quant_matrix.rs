//! `QuantMatrix`: a weight matrix as the matmul kernels read it, rows quantized in the
//! kernels' layout, with the dequantizers that decode them.

use std::sync::Arc;

use ferrite_model::weights::{DType, ModelWeights as LoadedWeights, Storage, WeightTensor};

use super::{amx, int8_support, q8_activations};
use crate::quant::{check_row, kernel_row_dequantizer, portable_kernel_row_dequantizer};
use crate::quant::{repack, QuantError, RowDequantizer};

/// A weight matrix as the kernels read it: quantized rows (in the kernels' layout: the
/// 32-element types repacked with f32 scales, see `quant::repack`) plus their dequantizers.
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    dtype: DType,
    storage: Storage,
    dequantize: RowDequantizer,
    dequantize_portable: RowDequantizer,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// How products with this matrix round x (the exact f32 path unless switched).
    path: ProductPath,
}

/// How a product with a matrix treats its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductPath {
    /// x in f32, each weight's exact value, f32 sums (`qgemm`).
    Exact,
    /// x rounded to bf16 and each weight's value to bf16, AMX tiles with f32 sums
    /// (`bf16_gemm`): the fast path.
    Bf16,
    /// x quantized to int8 per 256 elements, integer dot products (`int8_gemm`; Q4_K and Q6_K
    /// only, `--int8-activations`).
    Int8,
}

impl QuantMatrix {
    pub fn new(tensor: &WeightTensor) -> Result<Self, QuantError> {
        let (rows, cols, dtype) = (tensor.rows(), tensor.cols(), tensor.dtype);
        let dequantize = kernel_row_dequantizer(dtype)?;
        let dequantize_portable = portable_kernel_row_dequantizer(dtype)?;
        check_row(dtype, cols, dtype.row_bytes(cols))?;
        if cols % 16 != 0 {
            // Float rows are decoded 16 at a time, quantized ones by whole blocks (32 or 256).
            return Err(QuantError::RaggedRow { dtype, cols });
        }
        let total = tensor.storage.bytes().len();
        if total != rows * dtype.row_bytes(cols) {
            return Err(QuantError::WrongByteCount {
                dtype,
                cols: rows * cols,
                expected: rows * dtype.row_bytes(cols),
                got: total,
            });
        }
        let storage = match repack::repack(dtype, tensor.storage.bytes()) {
            Some(repacked) => Storage::Owned(Arc::new(repacked)),
            None => tensor.storage.clone(),
        };
        Ok(QuantMatrix {
            dtype,
            storage,
            dequantize,
            dequantize_portable,
            rows,
            cols,
            row_bytes: repack::row_bytes(dtype, cols),
            path: ProductPath::Exact,
        })
    }

    /// Makes products with this matrix take the int8 path (x quantized to int8 per block of
    /// 256, integer dot products), if its type has an integer kernel and this machine the
    /// instructions; returns whether it does.
    pub fn use_int8_activations(&mut self) -> bool {
        let int8 = int8_support::supports(self.dtype)
            && self.cols.is_multiple_of(q8_activations::BLOCK)
            && int8_support::available();
        if int8 {
            self.path = ProductPath::Int8;
        }
        int8
    }

    /// Makes products with this matrix take the bf16 path (`bf16_gemm`), if this machine has
    /// AMX tiles and the rows are whole tile steps (32 elements); returns whether it does.
    pub fn use_bf16(&mut self) -> bool {
        let bf16 = self.cols.is_multiple_of(amx::TILE_K) && amx::available();
        if bf16 {
            self.path = ProductPath::Bf16;
        }
        bf16
    }

    /// How products with this matrix treat x.
    pub fn path(&self) -> ProductPath {
        self.path
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    /// The first `n` rows as a matrix of their own, sharing the storage (rows are stored back
    /// to back, so a prefix of rows is a prefix of the bytes).
    pub fn first_rows(&self, n: usize) -> QuantMatrix {
        QuantMatrix {
            rows: n.min(self.rows),
            ..self.clone()
        }
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Bytes of one quantized row, in the kernels' layout.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }
    /// All rows, quantized, back to back, in the kernels' layout.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Dequantizes rows `first..first + count` into `out` (`count * cols` long).
    pub fn dequantize_rows(&self, first: usize, count: usize, out: &mut [f32]) {
        let bytes = &self.bytes()[first * self.row_bytes..(first + count) * self.row_bytes];
        (self.dequantize)(bytes, &mut out[..count * self.cols]);
    }

    /// As [`Self::dequantize_rows`], with the scalar reference dequantizer.
    pub fn dequantize_rows_portable(&self, first: usize, count: usize, out: &mut [f32]) {
        let bytes = &self.bytes()[first * self.row_bytes..(first + count) * self.row_bytes];
        (self.dequantize_portable)(bytes, &mut out[..count * self.cols]);
    }
}

/// Matrix `name` of `weights`, which must be `rows x cols`.
pub fn load_matrix(
    weights: &LoadedWeights,
    name: &str,
    rows: usize,
    cols: usize,
) -> anyhow::Result<QuantMatrix> {
    checked_matrix(weights.get(name)?, name, rows, cols)
}

/// `tensor` as a kernel matrix, which must be `rows x cols` (`name` for the error).
pub fn checked_matrix(
    tensor: &WeightTensor,
    name: &str,
    rows: usize,
    cols: usize,
) -> anyhow::Result<QuantMatrix> {
    let m = QuantMatrix::new(tensor).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    if m.rows() != rows || m.cols() != cols {
        anyhow::bail!(
            "{name} is {}x{}, the config says {rows}x{cols}",
            m.rows(),
            m.cols()
        );
    }
    Ok(m)
}
