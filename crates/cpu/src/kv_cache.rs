//! The KV page pool: per attention layer, K and V of shape `[num_pages, page_size,
//! num_kv_heads, head_dim]` in f32, each layer with its own head geometry (Gemma 4's global
//! layers are wider). A hybrid's linear-attention layers keep none, nor do the layers that
//! read another layer's pages (Gemma 4's KV-sharing layers). Sliding-window layers may keep
//! their pages in a pool of their own, addressed by the sequence's window table (the engine
//! gives those pages back once behind the window). The scheduler owns which page belongs to
//! whom; this only stores and addresses.

use ferrite_engine::{BackendError, SeqBatch};

use crate::kernels::attention::KvSource;

/// The K/V geometry of a layer that keeps pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvShape {
    pub num_kv_heads: usize,
    pub head_dim: usize,
    /// Positions a query reads, itself included (a sliding-window layer).
    pub window: Option<usize>,
}

impl KvShape {
    /// The geometry of an attention layer's K/V.
    pub fn of(a: &ferrite_model::plan::AttentionSpec) -> KvShape {
        KvShape {
            num_kv_heads: a.num_kv_heads,
            head_dim: a.head_dim,
            window: a.window,
        }
    }

    /// Floats of one token's K (or V): every KV head.
    pub fn width(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }
}

#[derive(Debug)]
struct LayerKv {
    k: Vec<f32>,
    v: Vec<f32>,
    /// `num_kv_heads * head_dim` (0 for a layer that keeps none).
    width: usize,
    head_dim: usize,
    /// In the window pool, addressed by `SeqBatch::window_table`.
    windowed: bool,
}

#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerKv>,
    num_pages: usize,
    /// Pages of the window pool (0: none).
    window_pages: usize,
    page_size: usize,
}

impl KvCache {
    /// `kv_layers[l]`: the K/V geometry of layer `l`, `None` for a layer without pages. With
    /// `window_pages > 0`, the sliding-window layers keep that many pages of their own.
    pub fn new(
        kv_layers: &[Option<KvShape>],
        num_pages: usize,
        window_pages: usize,
        page_size: usize,
    ) -> Result<Self, BackendError> {
        if page_size == 0 {
            return Err(BackendError("KV page size must be at least 1".into()));
        }
        let mut layers = Vec::with_capacity(kv_layers.len());
        for shape in kv_layers {
            let (width, head_dim) = shape.map_or((0, 0), |s| (s.width(), s.head_dim));
            let windowed = window_pages > 0 && shape.is_some_and(|s| s.window.is_some());
            let pages = if windowed { window_pages } else { num_pages };
            let len = pages
                .checked_mul(page_size)
                .and_then(|n| n.checked_mul(width))
                .ok_or_else(|| {
                    BackendError(format!(
                        "a KV pool of {pages} pages of {page_size} is too large"
                    ))
                })?;
            layers.push(LayerKv {
                k: zeroed(len)?,
                v: zeroed(len)?,
                width,
                head_dim,
                windowed,
            });
        }
        let window_pages = if layers.iter().any(|l| l.windowed) {
            window_pages
        } else {
            0
        };
        Ok(KvCache {
            layers,
            num_pages,
            window_pages,
            page_size,
        })
    }

    /// Bytes of K and V that layer `layer` holds (0 for a layer without pages).
    pub fn layer_bytes(&self, layer: usize) -> usize {
        self.layers
            .get(layer)
            .map_or(0, |l| (l.k.len() + l.v.len()) * std::mem::size_of::<f32>())
    }

    pub fn num_pages(&self) -> usize {
        self.num_pages
    }
    /// Pages of the sliding-window layers' own pool (0: they use the one pool).
    pub fn window_pages(&self) -> usize {
        self.window_pages
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Where a token's K (or V) starts in a layer of `width` floats a token.
    fn token_offset(&self, page: u32, slot: usize, width: usize) -> usize {
        (page as usize * self.page_size + slot) * width
    }

    /// The pages layer `layer` keeps `seq`'s K/V in.
    fn table<'a>(&self, layer: usize, seq: &SeqBatch<'a>) -> &'a [u32] {
        if self.layers[layer].windowed {
            seq.window_table
        } else {
            seq.block_table
        }
    }

    /// Stores the K and V of one token (all KV heads, `num_kv_heads * head_dim` each) at
    /// `position` of sequence `seq` (already validated).
    pub fn write(
        &mut self,
        layer: usize,
        seq: &SeqBatch<'_>,
        position: usize,
        k: &[f32],
        v: &[f32],
    ) {
        let block_table = self.table(layer, seq);
        let width = self.layers[layer].width;
        let offset = self.token_offset(
            block_table[position / self.page_size],
            position % self.page_size,
            width,
        );
        let layer = &mut self.layers[layer];
        layer.k[offset..offset + width].copy_from_slice(&k[..width]);
        layer.v[offset..offset + width].copy_from_slice(&v[..width]);
    }

    /// The keys and values of one KV head of one sequence, by position.
    pub fn head_view<'a>(
        &'a self,
        layer: usize,
        seq: &SeqBatch<'a>,
        kv_head: usize,
    ) -> HeadView<'a> {
        let block_table = self.table(layer, seq);
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
            self.layer.width,
        ) + self.kv_head * self.layer.head_dim
    }
}

impl KvSource for HeadView<'_> {
    fn key(&self, position: usize) -> &[f32] {
        let o = self.offset(position);
        &self.layer.k[o..o + self.layer.head_dim]
    }
    fn value(&self, position: usize) -> &[f32] {
        let o = self.offset(position);
        &self.layer.v[o..o + self.layer.head_dim]
    }
}
