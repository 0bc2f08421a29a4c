//! Reading `*.safetensors` (single or sharded) over memory maps, tensors kept as stored.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use safetensors::{Dtype, SafeTensors};

use super::fp8::Fp8Tensor;
use super::HfError;
use crate::mapping::{map_file, MapPages};
use crate::weights::{DType, Storage, WeightTensor};

/// A tensor as a file holds it: one ferrite's backends read, or FP8 bytes to dequantize with
/// their scale (hf::fp8) once every file is read.
pub enum Stored {
    Tensor(WeightTensor),
    Fp8(Fp8Tensor),
    /// u8 bytes: an MXFP4 tensor's `_blocks` or `_scales` (hf::mxfp4).
    Bytes(Fp8Tensor),
    /// Integers (i64, i32) or booleans (as 0 and 1), read out: an EAGLE-3 head's vocabulary
    /// maps. No weight of a model is one.
    Ints(Vec<i64>),
}

/// The safetensors files of a model directory: those the index names, else `model.safetensors`,
/// else every `*.safetensors` file.
pub fn weight_files(dir: &Path) -> Result<Vec<PathBuf>, HfError> {
    let index_path = dir.join("model.safetensors.index.json");
    if index_path.is_file() {
        let text = std::fs::read_to_string(&index_path).map_err(|e| HfError::io(&index_path, e))?;
        let shards = shards_of_index(&text)
            .map_err(|why| HfError::Weights(format!("{}: {why}", index_path.display())))?;
        return Ok(shards.into_iter().map(|f| dir.join(f)).collect());
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| HfError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(HfError::Weights(format!(
            "no *.safetensors files in {}",
            dir.display()
        )));
    }
    Ok(files)
}

/// The shard files a `model.safetensors.index.json` names, each once, sorted. A name that is
/// absolute or climbs with `..` is refused: it would reach outside the model's directory.
pub fn shards_of_index(text: &str) -> Result<Vec<String>, String> {
    let index: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let map = index
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| "no `weight_map` object".to_string())?;
    let mut shards = BTreeSet::new();
    for file in map.values() {
        let file = file
            .as_str()
            .ok_or_else(|| format!("`{file}` is not a file name"))?;
        if file.starts_with('/') || file.split('/').any(|part| part == "..") {
            return Err(format!("unsafe shard name `{file}`"));
        }
        shards.insert(file.to_string());
    }
    Ok(shards.into_iter().collect())
}

fn dtype_of(dtype: Dtype, name: &str) -> Result<DType, HfError> {
    match dtype {
        Dtype::F32 => Ok(DType::F32),
        Dtype::F16 => Ok(DType::F16),
        Dtype::BF16 => Ok(DType::BF16),
        other => Err(HfError::Weights(format!(
            "tensor `{name}` is {other:?}; only f32, f16, bf16 and FP8 e4m3 are supported"
        ))),
    }
}

/// Every tensor of one file, by its Hugging Face name, backed by the file's map.
pub fn read_file(path: &Path, pages: MapPages) -> Result<Vec<(String, Stored)>, HfError> {
    let file = std::fs::File::open(path).map_err(|e| HfError::io(path, e))?;
    let map = Arc::new(map_file(path, &file, pages).map_err(|e| HfError::io(path, e))?);
    let parsed = SafeTensors::deserialize(&map)
        .map_err(|e| HfError::Weights(format!("{}: {e}", path.display())))?;
    let base = map.as_ptr() as usize;
    parsed
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let data = view.data();
            let offset = data.as_ptr() as usize - base;
            let storage = Storage::Mapped {
                map: Arc::clone(&map),
                offset,
                len: data.len(),
            };
            let shape = view.shape().to_vec();
            let stored = if view.dtype() == Dtype::F8_E4M3 {
                Stored::Fp8(Fp8Tensor { shape, storage })
            } else if view.dtype() == Dtype::U8 {
                Stored::Bytes(Fp8Tensor { shape, storage })
            } else if let Some(ints) = ints_of(view.dtype(), data) {
                Stored::Ints(ints)
            } else {
                Stored::Tensor(WeightTensor {
                    dtype: dtype_of(view.dtype(), &name)?,
                    shape,
                    storage,
                })
            };
            Ok((name, stored))
        })
        .collect()
}

/// The values of an i64, i32 or bool tensor's little-endian bytes; `None` for other types.
fn ints_of(dtype: Dtype, data: &[u8]) -> Option<Vec<i64>> {
    Some(match dtype {
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("chunks of 8")))
            .collect(),
        Dtype::I32 => data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("chunks of 4")).into())
            .collect(),
        Dtype::BOOL => data.iter().map(|&b| i64::from(b != 0)).collect(),
        _ => return None,
    })
}
