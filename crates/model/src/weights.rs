//! Weight tensors as loaded: possibly quantized bytes, memory-mapped or owned.
//!
//! Tensors are named with GGUF's canonical names whatever the source format
//! (`token_embd.weight`, `blk.{i}.attn_q.weight`, `blk.{i}.attn_q.bias`, `blk.{i}.attn_k.weight`,
//! `blk.{i}.attn_v.weight`, `blk.{i}.attn_output.weight`, `blk.{i}.attn_norm.weight`,
//! `blk.{i}.ffn_norm.weight`, `blk.{i}.ffn_gate.weight`, `blk.{i}.ffn_up.weight`,
//! `blk.{i}.ffn_down.weight`, `output_norm.weight`, `output.weight` (absent when tied)).
//! Mixtures of experts add `blk.{i}.ffn_gate_inp.weight` (the router, `[experts, hidden]`), the
//! experts either stacked as llama.cpp's GGUF files have them (`blk.{i}.ffn_gate_exps.weight`,
//! `ffn_up_exps`, `ffn_down_exps`: `[experts, rows, cols]`) or one matrix per expert
//! (`blk.{i}.ffn_gate.{e}.weight`, as read from Hugging Face checkpoints; see
//! [`ModelWeights::expert`]), and qwen2_moe's shared expert (`ffn_{gate,up,down}_shexp`,
//! `ffn_gate_inp_shexp`).
//! A matrix is `[rows = out_features, cols = in_features]`, rows contiguous, each row quantized
//! in blocks along `cols` (GGUF's `ne0` is `cols`).

pub use crate::quant::DType;
use crate::tensor_names::ExpertProj;
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes that back a tensor: a slice of a memory-mapped file, or owned.
#[derive(Clone)]
pub enum Storage {
    Mapped {
        map: Arc<memmap2::Mmap>,
        offset: usize,
        len: usize,
    },
    Owned(Arc<Vec<u8>>),
}

impl Storage {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped { map, offset, len } => &map[*offset..*offset + *len],
            Storage::Owned(v) => v,
        }
    }
}

impl Storage {
    /// Bytes `start..start + len` as storage of their own: a narrower view of a mapped file, a
    /// copy of owned bytes.
    pub fn slice(&self, start: usize, len: usize) -> Storage {
        match self {
            Storage::Mapped { map, offset, .. } => Storage::Mapped {
                map: Arc::clone(map),
                offset: offset + start,
                len,
            },
            Storage::Owned(v) => Storage::Owned(Arc::new(v[start..start + len].to_vec())),
        }
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes)", self.bytes().len())
    }
}

#[derive(Debug, Clone)]
pub struct WeightTensor {
    pub dtype: DType,
    /// `[cols]` for vectors, `[rows, cols]` for matrices (outermost first).
    pub shape: Vec<usize>,
    pub storage: Storage,
}

impl WeightTensor {
    pub fn rows(&self) -> usize {
        if self.shape.len() == 1 {
            1
        } else {
            self.shape[0]
        }
    }
    pub fn cols(&self) -> usize {
        *self.shape.last().unwrap_or(&0)
    }
    /// The bytes of row `r`.
    pub fn row_bytes(&self, r: usize) -> &[u8] {
        let n = self.dtype.row_bytes(self.cols());
        &self.storage.bytes()[r * n..(r + 1) * n]
    }
}

/// Every tensor of a model, by canonical (GGUF) name.
#[derive(Debug, Clone, Default)]
pub struct ModelWeights {
    pub tensors: HashMap<String, WeightTensor>,
}

impl ModelWeights {
    pub fn get(&self, name: &str) -> anyhow::Result<&WeightTensor> {
        self.tensors
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("weight `{name}` is missing from the model file"))
    }

    /// Expert `expert`'s `proj` matrix of layer `layer`, `[rows, cols]`: a slice of the
    /// stacked `blk.{layer}.{proj}_exps.weight` when the file has one (GGUF; no copy for a
    /// mapped file), else the per-expert `blk.{layer}.{proj}.{expert}.weight`.
    pub fn expert(
        &self,
        layer: usize,
        proj: ExpertProj,
        expert: usize,
    ) -> anyhow::Result<WeightTensor> {
        let stacked = proj.stacked().of(layer);
        let Some(stack) = self.tensors.get(&stacked) else {
            return self.get(&proj.of_expert(layer, expert)).cloned();
        };
        let [experts, rows, cols] = stack.shape[..] else {
            anyhow::bail!(
                "`{stacked}` has shape {:?}, expected [experts, rows, cols]",
                stack.shape
            );
        };
        if expert >= experts {
            anyhow::bail!("`{stacked}` holds {experts} experts, expert {expert} was asked for");
        }
        let bytes = rows * stack.dtype.row_bytes(cols);
        if stack.storage.bytes().len() != experts * bytes {
            anyhow::bail!(
                "`{stacked}` has {} bytes, its shape {:?} needs {}",
                stack.storage.bytes().len(),
                stack.shape,
                experts * bytes
            );
        }
        Ok(WeightTensor {
            dtype: stack.dtype,
            shape: vec![rows, cols],
            storage: stack.storage.slice(expert * bytes, bytes),
        })
    }
}
