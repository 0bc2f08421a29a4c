//! Rotary position embeddings, computed as Hugging Face does in f32: angle = position ·
//! inv_freq[i], then `(a, b) -> (a·cos − b·sin, b·cos + a·sin)` on each pair of a head. The
//! frequencies come from `ModelConfig::rope_inv_freq` (the one definition, scaling included).

use ferrite_model::config::RopeStyle;

#[derive(Debug, Clone)]
pub struct Rope {
    inv_freq: Vec<f32>,
    style: RopeStyle,
}

impl Rope {
    /// A rope over `inv_freq` (`rotary_dim / 2` frequencies: the first `rotary_dim`
    /// dimensions of each head turn, the rest pass through).
    pub fn new(inv_freq: Vec<f32>, style: RopeStyle) -> Self {
        Rope { inv_freq, style }
    }

    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Fills `cos_sin` (`rotary_dim` long: cos then sin of each frequency) for `position`.
    pub fn table(&self, position: usize, cos_sin: &mut [f32]) {
        let half = self.inv_freq.len();
        for (i, &f) in self.inv_freq.iter().enumerate() {
            let angle = position as f32 * f;
            cos_sin[i] = angle.cos();
            cos_sin[half + i] = angle.sin();
        }
    }

    /// Rotates every head of `x` (`heads * head_dim`) with a table from [`Rope::table`].
    pub fn apply(&self, x: &mut [f32], head_dim: usize, cos_sin: &[f32]) {
        let half = self.inv_freq.len();
        let (cos, sin) = cos_sin[..2 * half].split_at(half);
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (ia, ib) = match self.style {
                    RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                    RopeStyle::Halves => (i, i + half),
                };
                let (a, b) = (head[ia], head[ib]);
                head[ia] = a * cos[i] - b * sin[i];
                head[ib] = b * cos[i] + a * sin[i];
            }
        }
    }
}
