//! Copying file tensors into their places in the weight arena: quantized blocks cut into their
//! device planes (crate::quant), other matrices widened to bf16 on every core, vectors as f32.

use cudarc::driver::CudaStream;
use ferrite_model::dequant::dequantize_row;
use ferrite_model::weights::{DType, WeightTensor};
use half::bf16;

use crate::buffer::upload;
use crate::device_ptr::DevicePtr;
use crate::linear::MatrixFormat;
use crate::quant::{split_planes, QuantType};

/// `tensor` (a matrix [rows, k]) into the part whose planes start at `planes`, from its row
/// `row_in_part` on.
pub(super) fn upload_matrix(
    stream: &CudaStream,
    planes: &[DevicePtr],
    format: MatrixFormat,
    row_in_part: usize,
    tensor: &WeightTensor,
) -> anyhow::Result<()> {
    let (rows, cols) = (tensor.rows(), tensor.cols());
    let bytes = tensor.storage.bytes();
    match format {
        MatrixFormat::Quant(q) => {
            anyhow::ensure!(
                tensor.dtype == q.dtype(),
                "a {:?} tensor planned as {q:?}",
                tensor.dtype
            );
            if q == QuantType::Fp8 {
                check_fp8_scales(tensor)?;
            }
            let blocks_before = row_in_part * (cols / q.block_len());
            let file_bytes = rows * tensor.dtype.row_bytes(cols);
            let pieces = split_planes(q, &bytes[..file_bytes]);
            for ((piece, &dst), &size) in pieces.iter().zip(planes).zip(&q.plane_bytes()) {
                upload(stream, dst.offset(blocks_before * size), piece)?;
            }
            // The pieces are host memory the copies read from until the stream gets there.
            stream.synchronize()?;
            Ok(())
        }
        MatrixFormat::Bf16 => {
            let dst = planes[0].offset(row_in_part * cols * 2);
            if tensor.dtype == DType::BF16 {
                return upload(stream, dst, bytes);
            }
            let row_bytes = tensor.dtype.row_bytes(cols);
            upload_widened(stream, dst, tensor.dtype, bytes, rows, cols, row_bytes)
        }
    }
}

/// A vector's values (norm weight, bias) as f32, plus `shift`.
pub(super) fn vector_f32(tensor: &WeightTensor, shift: f32) -> Vec<f32> {
    let (rows, cols) = (tensor.rows(), tensor.cols());
    let row_bytes = tensor.dtype.row_bytes(cols);
    let mut f = vec![0.0f32; rows * cols];
    dequantize_row(
        tensor.dtype,
        &tensor.storage.bytes()[..rows * row_bytes],
        &mut f,
    );
    if shift != 0.0 {
        f.iter_mut().for_each(|v| *v += shift);
    }
    f
}

/// A vector (norm weight, bias) as f32, plus `shift`.
pub(super) fn upload_vector(
    stream: &CudaStream,
    dst: DevicePtr,
    tensor: &WeightTensor,
    shift: f32,
) -> anyhow::Result<()> {
    upload(stream, dst, &vector_f32(tensor, shift))?;
    stream.synchronize()?;
    Ok(())
}

/// A matrix in any dtype the dequantizer knows, converted to bf16 on every core a group of row
/// slabs at a time (one thread per slab) and uploaded group by group: on one thread the
/// widening was most of an 8B F16 GGUF's load time (measured: docs/performance.md, '2026-12-03
/// 20:20 UTC, `bench/gpu/run.sh all` after issues 12 and 14's CUDA changes').
fn upload_widened(
    stream: &CudaStream,
    dst: DevicePtr,
    dtype: DType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    row_bytes: usize,
) -> anyhow::Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slab_rows = ((4 << 20) / cols.max(1)).max(1);
    let group_rows = slab_rows * threads;
    let mut group = vec![bf16::ZERO; group_rows.min(rows) * cols];
    let mut row = 0;
    while row < rows {
        let n = group_rows.min(rows - row);
        let out = &mut group[..n * cols];
        std::thread::scope(|scope| {
            for (k, slab) in out.chunks_mut(slab_rows * cols).enumerate() {
                let first = row + k * slab_rows;
                let src = &bytes[first * row_bytes..(first + slab.len() / cols) * row_bytes];
                scope.spawn(move || {
                    let mut f = vec![0.0f32; slab.len()];
                    dequantize_row(dtype, src, &mut f);
                    for (d, &v) in slab.iter_mut().zip(&f) {
                        *d = bf16::from_f32(v);
                    }
                });
            }
        });
        upload(stream, dst.offset(row * cols * 2), out)?;
        // Pageable copies are staged before returning, but keep the group alive until done.
        stream.synchronize()?;
        row += n;
    }
    Ok(())
}

/// The FP8 GEMV multiplies each block's scale by 2^120 (kernels/quant.cuh): scales must be
/// finite and below 2^7 (a weight of 448 x 2^7 = 57,344 and more is no model's).
fn check_fp8_scales(tensor: &WeightTensor) -> anyhow::Result<()> {
    let limit = 2f32.powi(7);
    let bad = tensor
        .storage
        .bytes()
        .chunks_exact(ferrite_model::fp8::BLOCK_BYTES)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .find(|s| !s.is_finite() || s.abs() >= limit);
    match bad {
        Some(s) => anyhow::bail!("an FP8 block scale of {s}: the CUDA kernels take |scale| < 128"),
        None => Ok(()),
    }
}
