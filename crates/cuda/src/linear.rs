//! A linear layer's weight on the device: one matrix, or several stacked along the output rows
//! (the fused Q/K/V and gate/up projections, whose file tensors may each have their own
//! quantized type — a Q4_K_M file has Q5_0 queries and Q8_0 values in one layer). Each part is
//! bf16 or one of the GGUF block formats (crate::quant), kept in its own bits.

use crate::device_ptr::DevicePtr;
use crate::quant::QuantType;

/// How a matrix's elements are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixFormat {
    Bf16,
    Quant(QuantType),
}

/// A row-major matrix [rows, k] in device memory: bf16 at `planes[0]`, or a quantized format's
/// planes (crate::quant), `None` past the format's last plane.
#[derive(Debug, Clone, Copy)]
pub struct Matrix {
    pub format: MatrixFormat,
    pub planes: [Option<DevicePtr>; 3],
}

impl Matrix {
    pub fn bf16(data: DevicePtr) -> Matrix {
        Matrix {
            format: MatrixFormat::Bf16,
            planes: [Some(data), None, None],
        }
    }

    /// The bf16 data (`None` for a quantized matrix).
    pub fn bf16_data(&self) -> Option<DevicePtr> {
        match self.format {
            MatrixFormat::Bf16 => self.planes[0],
            MatrixFormat::Quant(_) => None,
        }
    }
}

/// Output rows `row0 .. row0 + rows` of a linear layer, computed from one matrix.
#[derive(Debug, Clone, Copy)]
pub struct Part {
    pub row0: usize,
    pub rows: usize,
    pub matrix: Matrix,
}

/// y[n, rows] = x[n, k] W^T, W made of `parts` covering the rows in order.
#[derive(Debug, Clone)]
pub struct Linear {
    pub rows: usize,
    pub k: usize,
    pub parts: Vec<Part>,
}

impl Linear {
    /// A layer of one matrix.
    pub fn single(matrix: Matrix, rows: usize, k: usize) -> Linear {
        Linear {
            rows,
            k,
            parts: vec![Part {
                row0: 0,
                rows,
                matrix,
            }],
        }
    }

    /// Whether any part is quantized (the cuBLAS path then needs the dequantizing scratch).
    pub fn is_quantized(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p.matrix.format, MatrixFormat::Quant(_)))
    }
}
