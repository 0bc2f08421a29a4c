//! The paged KV cache on the device: for each layer a K and a V region of
//! [num_pages][num_kv_heads][page_size][head_dim] bf16, all in one allocation made once.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::ModelConfig;

use crate::buffer::{align_up, DeviceBuffer};
use crate::device_ptr::DevicePtr;

/// The whole KV cache: `num_pages` pages of `page_size` token slots, for every layer (the
/// engine hands out the page ids; this only turns them into addresses).
pub struct KvCache {
    buf: DeviceBuffer,
    /// Each layer's place among the attention layers (linear-attention layers read none).
    index: Vec<usize>,
    layer_bytes: usize,
    pub num_pages: usize,
    pub page_size: usize,
}

/// Bytes one token's K and V take across all attention layers, in bf16 (a hybrid's
/// linear-attention layers keep none).
pub fn bytes_per_token(c: &ModelConfig) -> usize {
    kv_layers(c) * 2 * c.num_kv_heads * c.head_dim * 2
}

/// The layers that keep K and V in pages.
fn kv_layers(c: &ModelConfig) -> usize {
    (0..c.num_layers)
        .filter(|&l| !c.is_linear_attention(l))
        .count()
}

impl KvCache {
    pub fn new(
        stream: &Arc<CudaStream>,
        c: &ModelConfig,
        num_pages: usize,
        page_size: usize,
    ) -> anyhow::Result<KvCache> {
        anyhow::ensure!(page_size > 0 && num_pages > 0, "empty KV pool");
        let layer_bytes = align_up(num_pages * page_size * c.num_kv_heads * c.head_dim * 2);
        // Slots are addressed with i32 in the kernels.
        anyhow::ensure!(
            num_pages * page_size < i32::MAX as usize,
            "KV pool of {num_pages} pages x {page_size} exceeds 2^31 slots"
        );
        let buf = DeviceBuffer::new(stream, layer_bytes * 2 * kv_layers(c).max(1))?;
        let mut next = 0;
        let index = (0..c.num_layers)
            .map(|l| {
                let at = next;
                next += usize::from(!c.is_linear_attention(l));
                at
            })
            .collect();
        Ok(KvCache {
            buf,
            index,
            layer_bytes,
            num_pages,
            page_size,
        })
    }
    /// Layer `layer`'s K region.
    pub fn k(&self, layer: usize) -> DevicePtr {
        self.buf.at(2 * self.index[layer] * self.layer_bytes)
    }
    /// Layer `layer`'s V region.
    pub fn v(&self, layer: usize) -> DevicePtr {
        self.buf.at((2 * self.index[layer] + 1) * self.layer_bytes)
    }
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}
