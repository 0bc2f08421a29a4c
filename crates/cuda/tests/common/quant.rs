//! Random GGUF-quantized tensors for the GPU tests (ferrite_model::dummy::quantized): the CPU
//! backend's dequantizer, exact against the GGUF reference, is the oracle the GPU is checked
//! against on the same bytes.

use ferrite_cuda::buffer::DeviceBuffer;
use ferrite_cuda::linear::{Matrix, MatrixFormat};
use ferrite_cuda::quant::{split_planes, QuantType};
use ferrite_model::dequant::dequantize_row;
use ferrite_model::weights::DType;

use super::{dev, Ctx};

/// An FP8 matrix's scales plane (f32 [rows, blocks], its bytes) block-major, as the loader
/// lays it beside them for cuBLASLt (crate::fp8_gemm).
pub fn scales_by_k(by_row: &[u8], rows: usize, blocks: usize) -> Vec<u8> {
    let scale = |r: usize, b: usize| &by_row[4 * (r * blocks + b)..4 * (r * blocks + b + 1)];
    (0..blocks)
        .flat_map(|b| (0..rows).flat_map(move |r| scale(r, b).to_vec()))
        .collect()
}

/// `rows` x `cols` random blocks of `dtype` with weights of about `scale`.
pub fn random_blocks(dtype: DType, rows: usize, cols: usize, scale: f32, seed: u64) -> Vec<u8> {
    ferrite_model::dummy::quantized::random_blocks(dtype, rows, cols, scale, seed)
}

/// A random [rows, k] matrix of `q` on the device (its planes' buffers, which must outlive
/// it; an FP8 one with its block-major scales too), and its host dequantization.
pub fn matrix(
    ctx: &Ctx,
    q: QuantType,
    rows: usize,
    k: usize,
    seed: u64,
) -> (Vec<DeviceBuffer>, Matrix, Vec<f32>) {
    let bytes = random_blocks(q.dtype(), rows, k, 0.05, seed);
    let mut host = vec![0.0f32; rows * k];
    dequantize_row(q.dtype(), &bytes, &mut host);
    let mut pieces = split_planes(q, &bytes);
    if q == QuantType::Fp8 {
        pieces.push(scales_by_k(&pieces[0], rows, k / 128));
    }
    let bufs: Vec<_> = pieces.iter().map(|p| dev(ctx, p)).collect();
    let mut planes = [None; 3];
    for (slot, b) in planes.iter_mut().zip(&bufs) {
        *slot = Some(b.ptr());
    }
    let m = Matrix {
        format: MatrixFormat::Quant(q),
        planes,
    };
    (bufs, m, host)
}
