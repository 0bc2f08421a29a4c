//! The KV page pool: per attention layer, K and V of shape `[num_pages, page_size,
//! num_kv_heads, head_dim]` in f32 (a hybrid's linear-attention layers keep none). The
//! scheduler owns which page belongs to whom; this only stores and addresses.

use ferrite_engine::BackendError;

use crate::kernels::attention::KvSource;

#[derive(Debug)]
struct LayerKv {
    k: Vec<f32>,
    v: Vec<f32>,
}

#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerKv>,
    num_pages: usize,
    page_size: usize,
    num_kv_heads: usize,
    head_dim: usize,
}

impl KvCache {
    /// `kv_layers[l]`: whether layer `l` keeps K and V in pages (attention layers do).
    pub fn new(
        kv_layers: &[bool],
        num_pages: usize,
        page_size: usize,
        num_kv_heads: usize,
        head_dim: usize,
    ) -> Result<Self, BackendError> {
        if page_size == 0 {
            return Err(BackendError("KV page size must be at least 1".into()));
        }
        let per_layer = num_pages
            .checked_mul(page_size)
            .and_then(|n| n.checked_mul(num_kv_heads * head_dim))
            .ok_or_else(|| {
                BackendError(format!(
                    "a KV pool of {num_pages} pages of {page_size} is too large"
                ))
            })?;
        let mut layers = Vec::with_capacity(kv_layers.len());
        for &keeps in kv_layers {
            let len = if keeps { per_layer } else { 0 };
            layers.push(LayerKv {
                k: zeroed(len)?,
                v: zeroed(len)?,
            });
        }
        Ok(KvCache {
            layers,
            num_pages,
            page_size,
            num_kv_heads,
            head_dim,
        })
    }

    pub fn num_pages(&self) -> usize {
        self.num_pages
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    fn token_offset(&self, page: u32, slot: usize) -> usize {
        (page as usize * self.page_size + slot) * self.num_kv_heads * self.head_dim
    }

    /// Stores the K and V of one token (all KV heads, `num_kv_heads * head_dim` each) at
    /// `position` of the sequence whose pages are `block_table` (already validated).
    pub fn write(
        &mut self,
        layer: usize,
        block_table: &[u32],
        position: usize,
        k: &[f32],
        v: &[f32],
    ) {
        let offset = self.token_offset(
            block_table[position / self.page_size],
            position % self.page_size,
        );
        let width = self.num_kv_heads * self.head_dim;
        let layer = &mut self.layers[layer];
        layer.k[offset..offset + width].copy_from_slice(&k[..width]);
        layer.v[offset..offset + width].copy_from_slice(&v[..width]);
    }

    /// The keys and values of one KV head of one sequence, by position.
    pub fn head_view<'a>(
        &'a self,
        layer: usize,
        block_table: &'a [u32],
        kv_head: usize,
    ) -> HeadView<'a> {
        HeadView {
            cache: self,
            layer: &self.layers[layer],
            block_table,
            kv_head,
        }
    }
}

/// Zeroed memory straight from the allocator, so the OS maps pages only as they are written.
fn zeroed(n: usize) -> Result<Vec<f32>, BackendError> {
    if n.checked_mul(4)
        .is_none_or(|bytes| bytes > isize::MAX as usize)
    {
        return Err(BackendError(format!(
            "a KV layer of {n} floats is too large"
        )));
    }
    Ok(vec![0.0; n])
}

pub struct HeadView<'a> {
    cache: &'a KvCache,
    layer: &'a LayerKv,
    block_table: &'a [u32],
    kv_head: usize,
}

impl HeadView<'_> {
    fn offset(&self, position: usize) -> usize {
        let c = self.cache;
        c.token_offset(
            self.block_table[position / c.page_size],
            position % c.page_size,
        ) + self.kv_head * c.head_dim
    }
}

impl KvSource for HeadView<'_> {
    fn key(&self, position: usize) -> &[f32] {
        let o = self.offset(position);
        &self.layer.k[o..o + self.cache.head_dim]
    }
    fn value(&self, position: usize) -> &[f32] {
        let o = self.offset(position);
        &self.layer.v[o..o + self.cache.head_dim]
    }
}
