//! Launcher of kernels/embedding.cu.

use super::launch::{grid1, Args, Kernels};
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// x[t] = table[tokens[t]] * scale (bf16 -> f32) for `n` tokens; `scale` is the model's
    /// embedding scale (`BlockVariant::embedding_scale`, 1 but for gemma).
    pub fn embedding(
        &self,
        table: DevicePtr,
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        scale: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        // embedding_gather(table, tokens, x, hidden, scale)
        let args = Args::new()
            .ptr(table)
            .ptr(tokens)
            .ptr(x)
            .usize(hidden)
            .f32(scale);
        self.launch("embedding_gather", grid1(n, 128), args)
    }
}
