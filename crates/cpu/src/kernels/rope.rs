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

    /// Whether this is the RoPE `spec` describes.
    pub fn is(&self, spec: &ferrite_model::plan::RopeSpec) -> bool {
        self.inv_freq == spec.inv_freq && self.style == spec.style
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

/// Where each rope's cos/sin tables of a step's `n` tokens lie in one buffer: `(offset,
/// width)` per rope, `width = 2 * inv_freq` (ropes of wider heads, Gemma 4's global layers,
/// have wider tables), each rope's `n` tables one after the other.
pub fn table_layout(ropes: &[Rope], n: usize) -> Vec<(usize, usize)> {
    let mut at = 0;
    ropes
        .iter()
        .map(|r| {
            let width = 2 * r.inv_freq().len();
            at += n * width;
            (at - n * width, width)
        })
        .collect()
}

/// Fills `buf` as `layout` lays it out, for tokens at `positions`.
pub fn fill_tables(
    ropes: &[Rope],
    layout: &[(usize, usize)],
    positions: &[usize],
    buf: &mut [f32],
) {
    for (rope, &(at, width)) in ropes.iter().zip(layout) {
        let tables = &mut buf[at..at + positions.len() * width];
        for (&pos, table) in positions.iter().zip(tables.chunks_exact_mut(width)) {
            rope.table(pos, table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{random_vec, rng};
    use ferrite_model::config::rope_inv_freq;

    #[test]
    fn rope_rotates_the_right_pairs_by_the_right_angles() {
        let (d, theta) = (8, 10000.0f32);
        for style in [RopeStyle::Interleaved, RopeStyle::Halves] {
            let rope = Rope::new(rope_inv_freq(d, theta, None), style);
            let mut table = vec![0.0; d];
            let mut r = rng(8);
            let x = random_vec(&mut r, 2 * d, 1.0);
            let position = 5;
            rope.table(position, &mut table);
            let mut y = x.clone();
            rope.apply(&mut y, d, &table);
            for head in 0..2 {
                for i in 0..d / 2 {
                    let (ia, ib) = match style {
                        RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                        RopeStyle::Halves => (i, i + d / 2),
                    };
                    let angle = position as f64 / (theta as f64).powf(2.0 * i as f64 / d as f64);
                    let (a, b) = (x[head * d + ia] as f64, x[head * d + ib] as f64);
                    let ea = a * angle.cos() - b * angle.sin();
                    let eb = b * angle.cos() + a * angle.sin();
                    assert!(
                        (y[head * d + ia] as f64 - ea).abs() < 1e-5,
                        "{style:?} pair {i}"
                    );
                    assert!(
                        (y[head * d + ib] as f64 - eb).abs() < 1e-5,
                        "{style:?} pair {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn partial_rope_turns_the_first_dimensions_of_each_head_and_keeps_the_rest() {
        // head_dim 8, rotary_dim 4 (partial_rotary_factor 0.5): rotate_half over dims 0..4.
        let (d, rotary, theta) = (8, 4, 10000.0f32);
        let rope = Rope::new(rope_inv_freq(rotary, theta, None), RopeStyle::Halves);
        let mut table = vec![0.0; d];
        let x = random_vec(&mut rng(9), 2 * d, 1.0);
        rope.table(3, &mut table);
        let mut y = x.clone();
        rope.apply(&mut y, d, &table);
        for head in 0..2 {
            let (x, y) = (&x[head * d..(head + 1) * d], &y[head * d..(head + 1) * d]);
            assert_eq!(x[rotary..], y[rotary..], "the pass-through dims");
            for i in 0..rotary / 2 {
                let angle = 3.0 / (theta as f64).powf(2.0 * i as f64 / rotary as f64);
                let (a, b) = (x[i] as f64, x[i + rotary / 2] as f64);
                assert!((y[i] as f64 - (a * angle.cos() - b * angle.sin())).abs() < 1e-5);
                assert!(
                    (y[i + rotary / 2] as f64 - (b * angle.cos() + a * angle.sin())).abs() < 1e-5
                );
            }
        }
    }
}
