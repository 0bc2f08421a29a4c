//! The paged KV cache on the device: for each layer a K and a V region of
//! [num_pages][num_kv_heads][page_size][head_dim] bf16, all in one allocation made once.
//! With a window pool, the sliding-window layers' regions hold `window_pages` pages instead,
//! addressed through the sequences' window tables (the engine gives those pages back once
//! behind the window); page 0 of that pool is the null page, zeroed and never written.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::ModelConfig;

use crate::buffer::{align_up, DeviceBuffer};
use crate::device_ptr::DevicePtr;

/// The whole KV cache: `num_pages` pages of `page_size` token slots, for every layer (the
/// engine hands out the page ids; this only turns them into addresses).
pub struct KvCache {
    buf: DeviceBuffer,
    /// Where each layer's K region starts (its V region follows it); `None` for a
    /// linear-attention layer.
    k_at: Vec<Option<usize>>,
    /// Bytes of each layer's K (and V) region.
    region: Vec<usize>,
    /// Whether layer `l` is in the window pool.
    windowed: Vec<bool>,
    pub num_pages: usize,
    /// Pages of the window pool (0: none).
    pub window_pages: usize,
    pub page_size: usize,
}

/// Bytes one token's K and V take across all attention layers, in bf16 (a hybrid's
/// linear-attention layers keep none).
pub fn bytes_per_token(c: &ModelConfig) -> usize {
    kv_layers(c) * token_bytes(c)
}

/// Bytes of one token's K and V in one layer.
pub fn token_bytes(c: &ModelConfig) -> usize {
    2 * c.num_kv_heads * c.head_dim * 2
}

/// The layers that keep K and V in pages.
fn kv_layers(c: &ModelConfig) -> usize {
    (0..c.num_layers)
        .filter(|&l| !c.is_linear_attention(l))
        .count()
}

/// The sliding-window layers that keep pages: the largest window, and their share of
/// [`bytes_per_token`].
pub fn window(c: &ModelConfig) -> Option<(usize, usize)> {
    let windows = (0..c.num_layers)
        .filter(|&l| !c.is_linear_attention(l))
        .filter_map(|l| c.attention(l).sliding_window);
    let tokens = windows.clone().max()?;
    Some((tokens, windows.count() * token_bytes(c)))
}

fn is_windowed(c: &ModelConfig, layer: usize) -> bool {
    !c.is_linear_attention(layer) && c.attention(layer).sliding_window.is_some()
}

impl KvCache {
    /// `window_pages > 0`: the sliding-window layers keep that many pages of their own.
    /// `extra_layers` full-attention layers of the config's KV shape follow the model's (a
    /// multi-token-prediction layer's, KV-cache layer `num_layers`).
    pub fn new(
        stream: &Arc<CudaStream>,
        c: &ModelConfig,
        num_pages: usize,
        window_pages: usize,
        page_size: usize,
        extra_layers: usize,
    ) -> anyhow::Result<KvCache> {
        anyhow::ensure!(page_size > 0 && num_pages > 0, "empty KV pool");
        let window_pages = if window(c).is_some() { window_pages } else { 0 };
        // Slots are addressed with i32 in the kernels.
        for pages in [num_pages, window_pages] {
            anyhow::ensure!(
                pages * page_size < i32::MAX as usize,
                "KV pool of {pages} pages x {page_size} exceeds 2^31 slots"
            );
        }
        let region_of = |pages: usize| align_up(pages * page_size * token_bytes(c) / 2);
        let layers = c.num_layers + extra_layers;
        let decoder = |l: usize| l < c.num_layers;
        let windowed: Vec<bool> = (0..layers)
            .map(|l| window_pages > 0 && decoder(l) && is_windowed(c, l))
            .collect();
        let mut next = 0;
        let (mut k_at, mut region) = (Vec::new(), Vec::new());
        for l in 0..layers {
            let bytes = region_of(if windowed[l] { window_pages } else { num_pages });
            region.push(bytes);
            if decoder(l) && c.is_linear_attention(l) {
                k_at.push(None);
            } else {
                k_at.push(Some(next));
                next += 2 * bytes;
            }
        }
        let buf = DeviceBuffer::new(stream, next.max(256))?;
        if window_pages > 0 {
            // The null page: read (behind every window, masked) but never written.
            let null_page = page_size * token_bytes(c) / 2;
            for l in (0..c.num_layers).filter(|&l| windowed[l]) {
                for at in [k_at[l], k_at[l].map(|k| k + region[l])]
                    .into_iter()
                    .flatten()
                {
                    buf.zero_range(at, null_page)?;
                }
            }
        }
        Ok(KvCache {
            buf,
            k_at,
            region,
            windowed,
            num_pages,
            window_pages,
            page_size,
        })
    }
    /// Whether layer `layer` keeps its pages in the window pool.
    pub fn is_windowed(&self, layer: usize) -> bool {
        self.windowed[layer]
    }
    /// Layer `layer`'s K region.
    pub fn k(&self, layer: usize) -> DevicePtr {
        self.buf.at(self.k_at[layer].unwrap_or(0))
    }
    /// Layer `layer`'s V region.
    pub fn v(&self, layer: usize) -> DevicePtr {
        self.buf
            .at(self.k_at[layer].map_or(0, |k| k + self.region[layer]))
    }
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}
