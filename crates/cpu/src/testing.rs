//! Test support for the unit tests: random inputs and random quantized weight tensors.

use std::sync::Arc;

use ferrite_model::weights::{DType, Storage, WeightTensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

pub fn random_vec(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// Byte offsets of the f16 scales inside one block of `dtype` (`d`, `m`, `dmin`: the
/// format's fields, ferrite_model::quant).
pub fn f16_fields(dtype: DType) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    for &(name, bytes) in ferrite_model::quant::format(dtype).fields {
        if bytes == 2 && matches!(name, "d" | "m" | "dmin") {
            offsets.push(at);
        }
        at += bytes;
    }
    offsets
}

/// A `[rows, cols]` matrix of `dtype` with random contents and sane scales.
pub fn random_tensor(
    rng: &mut StdRng,
    dtype: DType,
    rows: usize,
    cols: usize,
    scale: f32,
) -> WeightTensor {
    let bytes: Vec<u8> = match dtype {
        DType::F32 => random_vec(rng, rows * cols, scale)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F16 => random_vec(rng, rows * cols, scale)
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect(),
        DType::BF16 => random_vec(rng, rows * cols, scale)
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect(),
        _ => {
            let block_bytes = dtype.block_bytes();
            let mut bytes: Vec<u8> = (0..dtype.row_bytes(cols) * rows)
                .map(|_| rng.random())
                .collect();
            for block in bytes.chunks_exact_mut(block_bytes) {
                if dtype == DType::Fp8 {
                    // An f32 scale; every e4m3 code, NaN ones included, among the bytes.
                    let s = rng.random_range(-scale..scale) / 64.0;
                    block[0..4].copy_from_slice(&s.to_le_bytes());
                }
                for off in f16_fields(dtype) {
                    let s = half::f16::from_f32(rng.random_range(-scale..scale) / 8.0);
                    block[off..off + 2].copy_from_slice(&s.to_le_bytes());
                }
            }
            bytes
        }
    };
    let shape = if rows == 1 {
        vec![cols]
    } else {
        vec![rows, cols]
    };
    WeightTensor {
        dtype,
        shape,
        storage: Storage::Owned(Arc::new(bytes)),
    }
}

/// A random 37-row matrix of `dtype` with `k` columns made ready for the bf16 kernels
/// (`QuantMatrix::use_bf16`), and its exact weights.
#[cfg(target_arch = "x86_64")]
pub fn bf16_matrix(
    dtype: DType,
    k: usize,
    seed: u64,
) -> (crate::kernels::quant_matrix::QuantMatrix, Vec<f32>) {
    let rows = 37;
    let tensor = random_tensor(&mut rng(seed), dtype, rows, k, 1.0);
    let mut matrix = crate::kernels::quant_matrix::QuantMatrix::new(&tensor).unwrap();
    assert!(matrix.use_bf16());
    let mut w = vec![0.0; rows * k];
    matrix.dequantize_rows(0, rows, &mut w);
    (matrix, w)
}
