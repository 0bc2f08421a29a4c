//! Launcher of kernels/embedding.cu.

use super::launch::{grid1, Args, Kernels};
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// x[t] = table[tokens[t]] (bf16 -> f32) for `n` tokens.
    pub fn embedding(
        &self,
        table: DevicePtr,
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        // embedding_gather(table, tokens, x, hidden)
        let args = Args::new().ptr(table).ptr(tokens).ptr(x).usize(hidden);
        self.launch("embedding_gather", grid1(n, 128), args)
    }
}
