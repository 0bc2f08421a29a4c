//! Launcher of kernels/embedding.cu.

use super::launch::{grid1, Kernels};
use super::signatures::EmbeddingGather;
use crate::device_ptr::DevicePtr;
use crate::linear::{Matrix, MatrixFormat};

/// An embedding lookup: x[t] (f32 [n, hidden]) = table[tokens[t]] * scale for `n` tokens;
/// `scale` is the model's embedding scale (`ModelPlan::embedding_scale`, 1 but for gemma).
#[derive(Clone, Copy, Debug)]
pub struct Lookup {
    pub tokens: DevicePtr,
    pub x: DevicePtr,
    pub hidden: usize,
    pub scale: f32,
    pub n: usize,
}

impl Kernels {
    /// The lookup `l` on a bf16 table.
    pub fn embedding(&self, table: DevicePtr, l: &Lookup) -> anyhow::Result<()> {
        let params = EmbeddingGather {
            table,
            tokens: l.tokens,
            x: l.x,
            hidden: l.hidden,
            scale: l.scale,
        };
        self.launch(grid1(l.n, 128), &params)
    }

    /// The lookup `l` on a table in any device format: bf16 here, quantized tables through
    /// kernels/quant_dequant.cu.
    pub fn embed_tokens(&self, table: &Matrix, l: &Lookup) -> anyhow::Result<()> {
        match (table.format, table.bf16_data()) {
            (MatrixFormat::Quant(q), _) => self.qembed(q, table.planes, l),
            (MatrixFormat::Bf16, Some(data)) => self.embedding(data, l),
            (MatrixFormat::Bf16, None) => anyhow::bail!("a bf16 embedding table without data"),
        }
    }
}
