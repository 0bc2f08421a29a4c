//! Hugging Face `mxfp4` checkpoints (gpt-oss): a quantized matrix `X` is stored as
//! `X_blocks` (u8 `[.., rows, groups, 16]`, two E2M1 codes a byte, element `2k` in the low
//! nibble of byte `k` and `2k + 1` in its high nibble) and `X_scales` (u8 `[.., rows, groups]`,
//! E8M0 exponents), each group 32 consecutive elements of a row. Read into ferrite's MXFP4
//! blocks (GGML's layout, `quant::mxfp4`) without changing a value.

use std::sync::Arc;

use super::fp8::Fp8Tensor as RawTensor;
use super::HfError;
use crate::weights::{DType, Storage, WeightTensor};

/// The MXFP4 tensor `[.., rows, groups * 32]` of `name`'s blocks and scales.
pub fn load(name: &str, blocks: &RawTensor, scales: &RawTensor) -> Result<WeightTensor, HfError> {
    let (group_dims, last) = blocks.shape.split_at(blocks.shape.len().saturating_sub(1));
    if last != [16] || group_dims != scales.shape.as_slice() {
        return Err(HfError::Weights(format!(
            "`{name}_blocks` {:?} and `{name}_scales` {:?} are not MXFP4 blocks of 32 and their \
             exponents",
            blocks.shape, scales.shape
        )));
    }
    let (codes, exponents) = (blocks.storage.bytes(), scales.storage.bytes());
    let groups: usize = group_dims.iter().product();
    if codes.len() != groups * 16 || exponents.len() != groups {
        return Err(HfError::Weights(format!(
            "`{name}_blocks` / `_scales` hold {} / {} bytes for {groups} groups",
            codes.len(),
            exponents.len()
        )));
    }
    let mut out = Vec::with_capacity(groups * 17);
    for (packed, &e) in codes.chunks_exact(16).zip(exponents) {
        out.push(e);
        out.extend(relaid(packed));
    }
    let mut shape = group_dims.to_vec();
    let Some(cols) = shape.pop() else {
        return Err(HfError::Weights(format!("`{name}_scales` is a scalar")));
    };
    shape.push(cols * 32);
    Ok(WeightTensor {
        dtype: DType::Mxfp4,
        shape,
        storage: Storage::Owned(Arc::new(out)),
    })
}

/// One group's 16 bytes from neighbour pairs (element `2k`, `2k + 1` in byte `k`) to GGML's
/// halves (element `j`, `j + 16` in byte `j`).
fn relaid(packed: &[u8]) -> [u8; 16] {
    let code = |i: usize| (packed[i / 2] >> (4 * (i % 2))) & 0x0f;
    std::array::from_fn(|j| code(j) | (code(j + 16) << 4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dequant::dequantize;

    /// Elements 0..32 coded 0..15 twice over, in Hugging Face's pairing, under exponent 128:
    /// ferrite's blocks decode to E2M1[i % 16] * 2 at position i.
    #[test]
    fn reads_hugging_face_pairs_into_ggml_blocks() {
        let hf: Vec<u8> = (0..16u8)
            .map(|k| ((2 * k + 1) % 16) << 4 | (2 * k) % 16)
            .collect();
        let raw = |shape: Vec<usize>, bytes: Vec<u8>| RawTensor {
            shape,
            storage: Storage::Owned(Arc::new(bytes)),
        };
        let t = load("w", &raw(vec![1, 1, 16], hf), &raw(vec![1, 1], vec![128])).unwrap();
        assert_eq!((t.dtype, t.shape.clone()), (DType::Mxfp4, vec![1, 32]));
        let values = dequantize(&t);
        for (i, v) in values.iter().enumerate() {
            assert_eq!(*v, crate::quant::mxfp4::E2M1[i % 16] * 2.0, "element {i}");
        }
    }
}
