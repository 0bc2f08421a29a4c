//! Per-layer geometry of a `ModelConfig` where layers differ (Gemma 4): each layer's head size
//! and KV heads, whether its values are its keys, whose K/V pages it reads, its MLP's width.
//! Every other family answers the config's uniform values.

use super::{GlobalAttention, ModelConfig};

impl ModelConfig {
    /// The global-layer geometry of layer `layer`, for a full-attention layer of a model that
    /// has one (Gemma 4).
    pub fn global_attention_at(&self, layer: usize) -> Option<&GlobalAttention> {
        let global = self.attention(layer).sliding_window.is_none();
        self.block.global_attention.as_ref().filter(|_| global)
    }

    /// The head size of layer `layer`'s attention.
    pub fn head_dim_at(&self, layer: usize) -> usize {
        self.global_attention_at(layer)
            .map_or(self.head_dim, |g| g.head_dim)
    }

    /// The KV heads of layer `layer`'s attention.
    pub fn num_kv_heads_at(&self, layer: usize) -> usize {
        self.global_attention_at(layer)
            .map_or(self.num_kv_heads, |g| g.num_kv_heads)
    }

    /// Whether layer `layer` has no V projection, its values being its K projection.
    pub fn values_are_keys_at(&self, layer: usize) -> bool {
        self.global_attention_at(layer)
            .is_some_and(|g| g.values_are_keys)
    }

    /// The first layer that computes no K/V of its own (`num_layers` when none does).
    pub fn first_kv_shared_layer(&self) -> usize {
        self.num_layers.saturating_sub(self.block.kv_shared_layers)
    }

    /// The layer whose K/V pages layer `layer` reads instead of computing its own: the last
    /// layer before the shared ones with the same kind of attention (sliding or full), as
    /// transformers' `kv_sharing_modes`. `None` for a layer with K/V of its own, and for a
    /// shared layer without such a producer (`check_shape` refuses that).
    pub fn kv_source(&self, layer: usize) -> Option<usize> {
        let first = self.first_kv_shared_layer();
        if layer < first {
            return None;
        }
        let sliding = self.attention(layer).sliding_window.is_some();
        (0..first)
            .rev()
            .find(|&l| self.attention(l).sliding_window.is_some() == sliding)
    }

    /// The width of layer `layer`'s dense MLP.
    pub fn mlp_width_at(&self, layer: usize) -> usize {
        let wide = self.block.wide_mlp_on_shared_layers && layer >= self.first_kv_shared_layer();
        self.intermediate_size * if wide { 2 } else { 1 }
    }

    /// RoPE inverse frequencies of a Gemma 4 global layer ("proportional" RoPE): `head_dim / 2`
    /// of them, `theta^(-2i / head_dim)` for the first `rope_pairs` and 0 (no turn) after, in
    /// f32 as transformers computes them.
    pub(super) fn proportional_inv_freq(g: &GlobalAttention, theta: f32) -> Vec<f32> {
        (0..g.head_dim / 2)
            .map(|i| match i < g.rope_pairs {
                true => 1.0 / theta.powf((2 * i) as f32 / g.head_dim as f32),
                false => 0.0,
            })
            .collect()
    }

    /// The per-layer shape checks: global heads that share KV heads evenly, even global heads,
    /// a producer for every KV-sharing layer.
    pub(super) fn check_layers(&self) -> Result<(), String> {
        if let Some(g) = &self.block.global_attention {
            if g.num_kv_heads == 0 || !self.num_heads.is_multiple_of(g.num_kv_heads) {
                return Err(format!(
                    "{} attention heads cannot share {} global KV heads",
                    self.num_heads, g.num_kv_heads
                ));
            }
            if g.head_dim == 0 || !g.head_dim.is_multiple_of(2) || 2 * g.rope_pairs > g.head_dim {
                return Err(format!(
                    "global head_dim {} with {} rotated pairs: must be even, at most half",
                    g.head_dim, g.rope_pairs
                ));
            }
        }
        if self.block.kv_shared_layers >= self.num_layers && self.block.kv_shared_layers > 0 {
            return Err(format!(
                "{} KV-sharing layers of {}: some layer must compute K and V",
                self.block.kv_shared_layers, self.num_layers
            ));
        }
        let first = self.first_kv_shared_layer();
        if let Some(layer) = (first..self.num_layers).find(|&l| self.kv_source(l).is_none()) {
            return Err(format!(
                "layer {layer} shares K/V but no layer before {first} has its kind of attention"
            ));
        }
        Ok(())
    }
}
