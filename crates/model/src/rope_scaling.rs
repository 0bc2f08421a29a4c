//! RoPE frequency scaling, the one definition both backends use (through
//! `ModelConfig::rope_inv_freq` and `ModelConfig::rope_attention_factor`): Llama 3's and YaRN's,
//! computed in f32 as transformers computes them.

/// How a model's RoPE frequencies are scaled for long contexts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    Llama3(Llama3Scaling),
    Yarn(YarnScaling),
}

/// Llama 3.x RoPE scaling (`rope_type: llama3`): long wavelengths slowed by `factor`, short
/// ones kept, the band between interpolated. Applied to the frequencies, whatever the position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Scaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: usize,
}

/// YaRN (`rope_type: yarn`; gpt-oss): each frequency blends its interpolated (`/ factor`) and
/// original value by a linear ramp over the dimensions between the ones that turn `beta_fast`
/// and `beta_slow` times within `original_max_position_embeddings`; cos and sin are then
/// multiplied by `attention_factor` (so scores by its square).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YarnScaling {
    pub factor: f32,
    pub original_max_position_embeddings: usize,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// Round the ramp's ends outwards to whole dimensions (transformers' default).
    pub truncate: bool,
    pub attention_factor: f32,
}

impl YarnScaling {
    /// The paper's attention factor for `factor`: `0.1 ln(factor) + 1` (1 for no scaling).
    pub fn default_attention_factor(factor: f32) -> f32 {
        if factor <= 1.0 {
            1.0
        } else {
            0.1 * factor.ln() + 1.0
        }
    }
}

impl RopeScaling {
    /// What cos and sin are multiplied by (1 but for YaRN).
    pub fn attention_factor(&self) -> f32 {
        match self {
            RopeScaling::Llama3(_) => 1.0,
            RopeScaling::Yarn(y) => y.attention_factor,
        }
    }
}

/// `1 / theta^(2k/d)` for k in 0..d/2, in f32 as transformers computes it (and as both
/// backends always have), with the scaling applied on top.
pub fn rope_inv_freq(head_dim: usize, theta: f32, scaling: Option<&RopeScaling>) -> Vec<f32> {
    let plain = (0..head_dim / 2).map(|k| 1.0 / theta.powf((2 * k) as f32 / head_dim as f32));
    match scaling {
        None => plain.collect(),
        Some(RopeScaling::Llama3(s)) => plain.map(|inv| llama3(s, inv)).collect(),
        Some(RopeScaling::Yarn(y)) => yarn(y, head_dim, theta, plain.collect()),
    }
}

fn llama3(s: &Llama3Scaling, inv: f32) -> f32 {
    let wavelength = 2.0 * std::f32::consts::PI / inv;
    let original = s.original_max_position_embeddings as f32;
    let (low, high) = (s.low_freq_factor, s.high_freq_factor);
    if wavelength < original / high {
        inv
    } else if wavelength > original / low {
        inv / s.factor
    } else {
        let smooth = (original / wavelength - low) / (high - low);
        (1.0 - smooth) * inv / s.factor + smooth * inv
    }
}

/// transformers' `_compute_yarn_parameters`: the correction range in f64 (Python floats), the
/// ramp and the blend in f32 (torch).
fn yarn(y: &YarnScaling, dim: usize, theta: f32, extrapolation: Vec<f32>) -> Vec<f32> {
    let d = dim as f64;
    let base = theta as f64;
    let original = y.original_max_position_embeddings as f64;
    let correction_dim = |rotations: f64| {
        d * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
    };
    let (mut low, mut high) = (
        correction_dim(y.beta_fast as f64),
        correction_dim(y.beta_slow as f64),
    );
    if y.truncate {
        low = low.floor();
        high = high.ceil();
    }
    let (low, mut high) = (low.max(0.0), high.min(d - 1.0));
    if low == high {
        high += 0.001;
    }
    extrapolation
        .iter()
        .enumerate()
        .map(|(k, &inv_extrapolation)| {
            // torch: 1 / (factor * base^(2k/d)) from the same f32 powers.
            let pos_freq = 1.0 / inv_extrapolation;
            let inv_interpolation = 1.0 / (y.factor * pos_freq);
            let ramp = ((k as f32 - low as f32) / (high as f32 - low as f32)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            inv_interpolation * (1.0 - keep) + inv_extrapolation * keep
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gpt-oss-20b's YaRN (factor 32 over 4,096, head 64, base 150,000, truncate false): the
    /// fastest frequencies are kept, the slowest divided by 32, those between blended.
    #[test]
    fn yarn_keeps_fast_and_slows_slow_frequencies() {
        let y = YarnScaling {
            factor: 32.0,
            original_max_position_embeddings: 4096,
            beta_fast: 32.0,
            beta_slow: 1.0,
            truncate: false,
            attention_factor: YarnScaling::default_attention_factor(32.0),
        };
        let plain = rope_inv_freq(64, 150_000.0, None);
        let scaled = rope_inv_freq(64, 150_000.0, Some(&RopeScaling::Yarn(y)));
        assert_eq!(scaled[0], plain[0]);
        assert!((scaled[31] - plain[31] / 32.0).abs() <= 1e-6 * plain[31]);
        assert!(scaled[15] < plain[15] && scaled[15] > plain[15] / 32.0);
        assert!((y.attention_factor - 1.346_573_6).abs() < 1e-6);
    }
}
