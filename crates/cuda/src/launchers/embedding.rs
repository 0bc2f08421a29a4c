//! Launcher of kernels/embedding.cu.

use super::launch::{grid1, Kernels};
use super::signatures::EmbeddingGather;
use crate::device_ptr::DevicePtr;
use crate::linear::{Matrix, MatrixFormat};

impl Kernels {
    /// x[t] = table[tokens[t]] * scale (bf16 -> f32) for `n` tokens; `scale` is the model's
    /// embedding scale (`ModelPlan::embedding_scale`, 1 but for gemma).
    pub fn embedding(
        &self,
        table: DevicePtr,
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        scale: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        let params = EmbeddingGather {
            table,
            tokens,
            x,
            hidden,
            scale,
        };
        self.launch(grid1(n, 128), &params)
    }

    /// The embedding lookup on a table in any device format: bf16 here, quantized tables
    /// through kernels/quant_dequant.cu.
    pub fn embed_tokens(
        &self,
        table: &Matrix,
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        scale: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        match (table.format, table.bf16_data()) {
            (MatrixFormat::Quant(q), _) => {
                self.qembed(q, table.planes, tokens, x, hidden, scale, n)
            }
            (MatrixFormat::Bf16, Some(data)) => self.embedding(data, tokens, x, hidden, scale, n),
            (MatrixFormat::Bf16, None) => anyhow::bail!("a bf16 embedding table without data"),
        }
    }
}
