//! FP8 (e4m3) weights kept as FP8: ferrite's block layout ([`DType::Fp8`]), the e4m3 encoder,
//! and the per-channel quantizer behind `--quantization fp8` (decoding is the dequantizer's,
//! `crate::quant::fp8`, re-exported here).
//!
//! A block is 128 consecutive weights of one row: the f32 scale (little-endian), then the 128
//! e4m3 bytes; a weight is `e4m3 * scale`, one f32 product, as FP8 checkpoints define it. A
//! checkpoint's scales (per tensor, per output channel, or per 128 x 128 block) are copied
//! into every block they cover, so one layout serves them all, and a kernel finds a weight's
//! scale beside its bytes: 4 bytes per 128, 3% over the file's FP8 bytes.

use std::sync::Arc;

use rayon::prelude::*;

pub use crate::quant::fp8::{dequantize_blocks, e4m3_to_f32};
use crate::weights::{DType, ModelWeights, Storage, WeightTensor};

/// Weights per block.
pub const BLOCK: usize = DType::Fp8.block_len();
/// Bytes per block: the f32 scale and the 128 e4m3 bytes.
pub const BLOCK_BYTES: usize = DType::Fp8.block_bytes();
/// The largest finite e4m3 value.
pub use crate::quant::E4M3_MAX;

/// The e4m3 byte nearest to `v` (ties to even), saturating at ±448 as the `satfinite`
/// conversions of CUDA and of vLLM's quantizer (which clamps before casting) do; NaN stays NaN.
pub fn f32_to_e4m3(v: f32) -> u8 {
    if v.is_nan() {
        return 0x7f;
    }
    let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
    let a = v.abs().min(E4M3_MAX);
    // Below 2^-6 the spacing is 2^-9 (subnormals); a count of 8 is the smallest normal, whose
    // encoding 0x08 the formula gives as well.
    if a < 2f32.powi(-6) {
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    let exponent = ((a.to_bits() >> 23) as i32) - 127; // floor(log2 a), a is normal in f32
    let steps = (a / 2f32.powi(exponent) * 8.0).round_ties_even() as u32; // 8 ..= 16, exact
    let (exponent, mantissa) = if steps == 16 {
        (exponent + 1, 0)
    } else {
        (exponent, steps - 8)
    };
    sign | (((exponent + 7) as u8) << 3) | mantissa as u8
}

/// A [rows, cols] FP8 matrix (`fp8`, one byte per weight, rows contiguous) in ferrite's
/// block layout, the scale of block `b` (columns `128 b ..`) of row `r` being `scale(r, b)`.
/// `cols` must be a multiple of 128.
pub fn to_blocks(
    rows: usize,
    cols: usize,
    fp8: &[u8],
    scale: &(dyn Fn(usize, usize) -> f32 + Sync),
) -> WeightTensor {
    debug_assert!(cols.is_multiple_of(BLOCK) && fp8.len() == rows * cols);
    let row_bytes = DType::Fp8.row_bytes(cols);
    let mut out = vec![0u8; rows * row_bytes];
    out.par_chunks_mut(row_bytes.max(1))
        .zip(fp8.par_chunks(cols.max(1)))
        .enumerate()
        .for_each(|(r, (dst, src))| {
            for (b, (dst, src)) in dst
                .chunks_exact_mut(BLOCK_BYTES)
                .zip(src.chunks(BLOCK))
                .enumerate()
            {
                dst[..4].copy_from_slice(&scale(r, b).to_le_bytes());
                dst[4..].copy_from_slice(src);
            }
        });
    WeightTensor {
        dtype: DType::Fp8,
        shape: vec![rows, cols],
        storage: Storage::Owned(Arc::new(out)),
    }
}

/// `values` ([rows, cols] f32) quantized per output channel as vLLM's `--quantization fp8`
/// does: each row's scale is its largest magnitude / 448, each weight `e4m3(w / scale)`.
pub fn quantize_per_channel(rows: usize, cols: usize, values: &[f32]) -> WeightTensor {
    let row_scales: Vec<f32> = values
        .par_chunks(cols.max(1))
        .map(|row| {
            let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            // An all-zero row keeps scale 1 (its bytes are zero either way).
            if max > 0.0 {
                max / E4M3_MAX
            } else {
                1.0
            }
        })
        .collect();
    let fp8: Vec<u8> = values
        .par_chunks(cols.max(1))
        .zip(&row_scales)
        .flat_map_iter(|(row, &s)| row.iter().map(move |&w| f32_to_e4m3(w / s)))
        .collect();
    to_blocks(rows, cols, &fp8, &|r, _| row_scales[r])
}

#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    #[error(
        "--quantization fp8 quantizes float checkpoints; `{name}` is already {dtype:?} \
         (leave the flag out to run the file's own quantization)"
    )]
    AlreadyQuantized { name: String, dtype: DType },
    #[error(
        "--quantization fp8: no linear layer has a multiple of 128 input features, so nothing \
         would be quantized"
    )]
    NothingToQuantize,
}

/// Whether `name` is a linear layer's weight `--quantization fp8` converts: the attention and
/// MLP projections and every expert's, not the embedding, the output projection, nor a
/// mixture's router (vLLM keeps those in 16 bits as well).
fn is_quantized_linear(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("blk.") else {
        return false;
    };
    let Some((_, tensor)) = rest.split_once('.') else {
        return false;
    };
    const LINEAR: [&str; 7] = [
        "attn_q.",
        "attn_k.",
        "attn_v.",
        "attn_output.",
        "ffn_gate.",
        "ffn_up.",
        "ffn_down.",
    ];
    let shared = ["ffn_gate_shexp.", "ffn_up_shexp.", "ffn_down_shexp."];
    tensor.ends_with("weight") && (LINEAR.iter().chain(&shared).any(|p| tensor.starts_with(p)))
}

/// Quantizes every linear layer of `weights` to FP8 per output channel (`--quantization fp8`):
/// matrices whose rows are not whole 128-weight blocks stay as they are. Returns how many
/// matrices were quantized.
pub fn quantize_linear_layers(weights: &mut ModelWeights) -> Result<usize, QuantizeError> {
    let mut names: Vec<String> = Vec::new();
    for (name, t) in &weights.tensors {
        if !is_quantized_linear(name) || t.shape.len() != 2 {
            continue;
        }
        match t.dtype {
            DType::F32 | DType::F16 | DType::BF16 => {}
            dtype => {
                return Err(QuantizeError::AlreadyQuantized {
                    name: name.clone(),
                    dtype,
                })
            }
        }
        if t.cols().is_multiple_of(BLOCK) {
            names.push(name.clone());
        }
    }
    if names.is_empty() {
        return Err(QuantizeError::NothingToQuantize);
    }
    for name in &names {
        let t = &weights.tensors[name];
        let values = crate::dequant::dequantize(t);
        let quantized = quantize_per_channel(t.rows(), t.cols(), &values);
        weights.tensors.insert(name.clone(), quantized);
    }
    Ok(names.len())
}

#[cfg(test)]
#[path = "fp8_tests.rs"]
mod tests;
