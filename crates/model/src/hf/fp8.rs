//! FP8 (e4m3) checkpoints: Hugging Face's `fp8` quantization (block scales `weight_scale_inv`,
//! `weight_block_size`, as DeepSeek-V3 and Qwen3-FP8 ship) and compressed-tensors'
//! float-quantized weights (`weight_scale` per tensor, per output channel or per block).
//!
//! A weight whose scales each cover whole runs of 128 columns (per tensor, per channel, and
//! the usual 128 x 128 blocks) loads into ferrite's FP8 block layout (crate::fp8): the
//! file's bytes with each run's scale beside them, kept as FP8 by both backends. Finer scale
//! grids (the tiny test fixtures' 16 x 32 blocks) and rows that are not whole 128-weight runs
//! are dequantized at load into f32, `w = fp8 * scale` (the same f32 product).

use std::sync::Arc;

use half::{bf16, f16};
use rayon::prelude::*;
use serde_json::Value;

use super::HfError;
use crate::fp8::BLOCK;
use crate::weights::{DType, Storage, WeightTensor};

/// An FP8 e4m3 tensor as stored (one byte per element).
#[derive(Debug, Clone)]
pub struct Fp8Tensor {
    pub shape: Vec<usize>,
    pub storage: Storage,
}

/// What config.json's `quantization_config` says about FP8 weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8Config {
    /// Rows x columns a block scale covers (when the scales are per block).
    pub block: [usize; 2],
}

/// The FP8 settings of a config.json: `None` without a `quantization_config`; an error for a
/// quantization ferrite does not read (AWQ, GPTQ, int4 compressed-tensors, ...).
pub fn fp8_config(config_json: &str) -> Result<Option<Fp8Config>, HfError> {
    let json: Value = serde_json::from_str(config_json).map_err(HfError::Config)?;
    let Some(q) = json.get("quantization_config") else {
        return Ok(None);
    };
    let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("");
    let pair = |v: Option<&Value>| -> Option<[usize; 2]> {
        let a = v?.as_array()?;
        match (a.first()?.as_u64(), a.get(1)?.as_u64()) {
            (Some(r), Some(c)) if r > 0 && c > 0 => Some([r as usize, c as usize]),
            _ => None,
        }
    };
    match method {
        "fp8" => {
            if let Some(fmt) = q.get("fmt").and_then(Value::as_str) {
                if fmt != "e4m3" {
                    return Err(HfError::Unsupported(format!(
                        "fp8 format `{fmt}` (e4m3 is)"
                    )));
                }
            }
            let block = pair(q.get("weight_block_size")).unwrap_or([128, 128]);
            Ok(Some(Fp8Config { block }))
        }
        "compressed-tensors" => {
            let groups = q.get("config_groups").and_then(Value::as_object);
            let mut block = [128, 128];
            for group in groups.into_iter().flat_map(|g| g.values()) {
                let Some(w) = group.get("weights") else {
                    continue;
                };
                let kind = w.get("type").and_then(Value::as_str).unwrap_or("");
                let bits = w.get("num_bits").and_then(Value::as_u64).unwrap_or(0);
                if kind != "float" || bits != 8 {
                    return Err(HfError::Unsupported(format!(
                        "compressed-tensors weights of type `{kind}` with {bits} bits \
                         (8-bit float is read)"
                    )));
                }
                if let Some(b) = pair(w.get("block_structure")) {
                    block = b;
                }
            }
            Ok(Some(Fp8Config { block }))
        }
        // Not FP8: its tensors come in `_blocks` / `_scales` pairs (hf::mxfp4).
        "mxfp4" => Ok(None),
        other => Err(HfError::Unsupported(format!(
            "quantization method `{other}` (fp8, float8 compressed-tensors and mxfp4 checkpoints \
             are read)"
        ))),
    }
}

/// A scale tensor's values as f32 (checkpoints store them in f32, sometimes bf16 or f16).
fn scale_values(name: &str, t: &WeightTensor) -> Result<Vec<f32>, HfError> {
    let bytes = t.storage.bytes();
    Ok(match t.dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => {
            return Err(HfError::Weights(format!(
                "scale `{name}` is {other:?}; f32, bf16 or f16 expected"
            )))
        }
    })
}

/// Where a matrix's scales are: rows come in groups of `group_rows` sharing a run of `count`
/// scales (`values[(r / group_rows) * count ..]`), each covering `width` columns.
struct ScaleLayout {
    values: Vec<f32>,
    group_rows: usize,
    count: usize,
    width: usize,
}

impl ScaleLayout {
    /// Row `r`'s run of scales.
    fn row(&self, r: usize) -> &[f32] {
        let first = (r / self.group_rows) * self.count;
        &self.values[first..first + self.count]
    }
}

/// The matrix shape of `weight`, and its scales' layout: the scale's shape says it: one value
/// (per tensor), one per row (`[rows]` or `[rows, 1]`: per output channel), or
/// `[ceil(rows / br), ceil(cols / bc)]` (per block of `config.block`).
fn scale_layout(
    weight: &Fp8Tensor,
    scale_name: &str,
    scale: &WeightTensor,
    config: Fp8Config,
) -> Result<(usize, usize, ScaleLayout), HfError> {
    let (rows, cols) = match weight.shape[..] {
        [r, c] => (r, c),
        _ => {
            return Err(HfError::Weights(format!(
                "an FP8 tensor of shape {:?}: only matrices are read",
                weight.shape
            )))
        }
    };
    let values = scale_values(scale_name, scale)?;
    let [br, bc] = config.block;
    let (srows, scols) = (rows.div_ceil(br), cols.div_ceil(bc));
    let (group_rows, count, width) = if values.len() == 1 {
        (rows, 1, cols)
    } else if scale.shape[..] == [rows] || scale.shape[..] == [rows, 1] {
        (1, 1, cols)
    } else if scale.shape[..] == [srows, scols] {
        (br, scols, bc)
    } else {
        return Err(HfError::Weights(format!(
            "scale `{scale_name}` of shape {:?} fits neither one value, {rows} rows, nor \
             {srows} x {scols} blocks of {br} x {bc}",
            scale.shape
        )));
    };
    let bytes = weight.storage.bytes();
    if bytes.len() != rows * cols {
        return Err(HfError::Weights(format!(
            "FP8 tensor of {rows} x {cols} has {} bytes",
            bytes.len()
        )));
    }
    let layout = ScaleLayout {
        values,
        group_rows: group_rows.max(1),
        count,
        width: width.max(1),
    };
    Ok((rows, cols, layout))
}

/// `weight` with its scale `scale` (named `scale_name`, for errors) as ferrite loads it: in
/// the FP8 block layout when every 128-column run of a row has one scale, else dequantized.
pub fn load(
    weight: &Fp8Tensor,
    scale_name: &str,
    scale: &WeightTensor,
    config: Fp8Config,
) -> Result<WeightTensor, HfError> {
    let (rows, cols, layout) = scale_layout(weight, scale_name, scale, config)?;
    let runs_fit = layout.count == 1 || layout.width.is_multiple_of(BLOCK);
    if !cols.is_multiple_of(BLOCK) || !runs_fit {
        return Ok(dequantize_with(weight, cols, &layout));
    }
    let bytes = weight.storage.bytes();
    Ok(crate::fp8::to_blocks(rows, cols, bytes, &|r, b| {
        layout.row(r)[b * BLOCK / layout.width]
    }))
}

/// `weight` dequantized with `scale` (named `scale_name`, for errors) into an f32 tensor.
pub fn dequantize(
    weight: &Fp8Tensor,
    scale_name: &str,
    scale: &WeightTensor,
    config: Fp8Config,
) -> Result<WeightTensor, HfError> {
    let (_, cols, layout) = scale_layout(weight, scale_name, scale, config)?;
    Ok(dequantize_with(weight, cols, &layout))
}

/// `weight` (rows of `cols` bytes, checked by [`scale_layout`]) times its scales, in f32.
fn dequantize_with(weight: &Fp8Tensor, cols: usize, layout: &ScaleLayout) -> WeightTensor {
    let bytes = weight.storage.bytes();
    let table = crate::quant::fp8::e4m3_table();
    let mut out = vec![0u8; 4 * bytes.len()];
    // Rows in parallel: a real checkpoint's matrices hold billions of weights, at load.
    out.par_chunks_mut(4 * cols.max(1))
        .zip(bytes.par_chunks(cols.max(1)))
        .enumerate()
        .for_each(|(r, (dst, src))| {
            let runs = src.chunks(layout.width).zip(layout.row(r));
            for ((run, &scale), dst) in runs.zip(dst.chunks_mut(4 * layout.width)) {
                for (&b, d) in run.iter().zip(dst.chunks_exact_mut(4)) {
                    d.copy_from_slice(&(table[b as usize] * scale).to_le_bytes());
                }
            }
        });
    WeightTensor {
        dtype: DType::F32,
        shape: weight.shape.clone(),
        storage: Storage::Owned(Arc::new(out)),
    }
}

#[cfg(test)]
#[path = "fp8_tests.rs"]
mod tests;
