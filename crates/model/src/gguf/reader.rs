//! The binary layout of a GGUF file: header, metadata key/values, tensor infos.
//! Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md

use std::collections::HashMap;

use super::metadata::{MetaValue, Metadata};
use super::GgufError;
use crate::weights::DType;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: usize = 32;
/// Nesting deeper than this is not something a real writer produces; refusing it keeps a
/// corrupt file from recursing without bound.
const MAX_ARRAY_DEPTH: usize = 4;

/// Where a tensor lives in the file, before it is turned into a `WeightTensor`.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: `dims[0]` (ne0) is the contiguous dimension.
    pub dims: Vec<u64>,
    pub dtype: DType,
    /// Absolute byte offset in the file.
    pub offset: usize,
    pub len: usize,
}

/// Everything in a GGUF file except the tensor bytes.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], GgufError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| GgufError::Truncated {
                what: what.to_string(),
                offset: self.pos,
                file_len: self.bytes.len(),
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count or length; v1 files wrote these as u32.
    fn len(&mut self, version: u32, what: &str) -> Result<u64, GgufError> {
        if version == 1 {
            self.u32(what).map(u64::from)
        } else {
            self.u64(what)
        }
    }

    fn string(&mut self, version: u32, what: &str) -> Result<String, GgufError> {
        let n = self.len(version, what)?;
        let n =
            usize::try_from(n).map_err(|_| GgufError::Corrupt(format!("{what}: length {n}")))?;
        let raw = self.take(n, what)?;
        // Some converters wrote vocabularies with invalid UTF-8 (partial byte tokens); keep them
        // readable rather than refusing the model.
        Ok(String::from_utf8_lossy(raw).into_owned())
    }

    fn value(
        &mut self,
        version: u32,
        type_id: u32,
        key: &str,
        depth: usize,
    ) -> Result<MetaValue, GgufError> {
        Ok(match type_id {
            0 => MetaValue::U8(self.array::<1>(key)?[0]),
            1 => MetaValue::I8(self.array::<1>(key)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(key)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(key)?)),
            4 => MetaValue::U32(self.u32(key)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(key)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(key)?)),
            7 => MetaValue::Bool(self.array::<1>(key)?[0] != 0),
            8 => MetaValue::String(self.string(version, key)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(GgufError::Corrupt(format!(
                        "metadata `{key}`: arrays nested too deep"
                    )));
                }
                let elem_type = self.u32(key)?;
                let count = self.len(version, key)?;
                // Every element takes at least one byte: a count beyond the file is corrupt, and
                // checking first keeps a bad count from allocating unbounded memory.
                if count > (self.bytes.len() - self.pos) as u64 {
                    return Err(GgufError::Truncated {
                        what: format!("metadata array `{key}` of {count} elements"),
                        offset: self.pos,
                        file_len: self.bytes.len(),
                    });
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(version, elem_type, key, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(key)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(key)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(key)?)),
            other => {
                return Err(GgufError::Corrupt(format!(
                    "metadata `{key}`: unknown value type {other}"
                )))
            }
        })
    }
}

/// Parses the header, metadata and tensor infos, and checks every tensor lies inside the file.
pub fn parse(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    let mut c = Cursor { bytes, pos: 0 };
    let magic = c.array::<4>("magic")?;
    if &magic != MAGIC {
        return Err(GgufError::BadMagic(magic));
    }
    let version = c.u32("version")?;
    if !(1..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let tensor_count = c.len(version, "tensor count")?;
    let kv_count = c.len(version, "metadata count")?;

    let mut values = HashMap::new();
    for _ in 0..kv_count {
        let key = c.string(version, "metadata key")?;
        let type_id = c.u32(&key)?;
        let value = c.value(version, type_id, &key, 0)?;
        values.insert(key, value);
    }
    let metadata = Metadata { values };

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => v
            .as_u64()
            .and_then(|a| usize::try_from(a).ok())
            .filter(|a| a.is_power_of_two())
            .ok_or_else(|| {
                GgufError::Corrupt(format!("general.alignment {v:?} is not a power of two"))
            })?,
    };

    let mut raw_infos = Vec::new();
    for _ in 0..tensor_count {
        let name = c.string(version, "tensor name")?;
        let n_dims = c.u32(&name)?;
        if n_dims == 0 || n_dims > 4 {
            return Err(GgufError::Corrupt(format!(
                "tensor `{name}` has {n_dims} dimensions"
            )));
        }
        let dims = (0..n_dims)
            .map(|_| c.len(version, &name))
            .collect::<Result<Vec<_>, _>>()?;
        let type_id = c.u32(&name)?;
        let rel_offset = c.u64(&name)?;
        raw_infos.push((name, dims, type_id, rel_offset));
    }
    let data_start = c.pos.div_ceil(alignment) * alignment;

    let tensors = raw_infos
        .into_iter()
        .map(|(name, dims, type_id, rel_offset)| {
            locate(bytes.len(), data_start, name, dims, type_id, rel_offset)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
    })
}

fn locate(
    file_len: usize,
    data_start: usize,
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    rel_offset: u64,
) -> Result<TensorInfo, GgufError> {
    let dtype = crate::quant::from_ggml_type(type_id).ok_or_else(|| GgufError::UnknownType {
        tensor: name.clone(),
        type_id,
    })?;
    let ne0 = dims[0] as usize;
    if ne0 % dtype.block_len() != 0 {
        return Err(GgufError::Corrupt(format!(
            "tensor `{name}`: row length {ne0} is not a multiple of the {dtype:?} block ({})",
            dtype.block_len()
        )));
    }
    let rows = dims[1..]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let len = rows
        .and_then(|r| (dtype.row_bytes(ne0) as u64).checked_mul(r))
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| GgufError::Corrupt(format!("tensor `{name}`: dims {dims:?} overflow")))?;
    let offset = usize::try_from(rel_offset)
        .ok()
        .and_then(|o| o.checked_add(data_start))
        .filter(|o| o.checked_add(len).is_some_and(|end| end <= file_len))
        .ok_or_else(|| GgufError::Truncated {
            what: format!("data of tensor `{name}` ({len} bytes at data offset {rel_offset})"),
            offset: data_start,
            file_len,
        })?;
    Ok(TensorInfo {
        name,
        dims,
        dtype,
        offset,
        len,
    })
}
