//! `--load-format dummy`: random weights of a model's real shapes, for measuring performance
//! where real weights are not at hand (vLLM's option of the same name).
//!
//! A model's shape comes from a built-in preset or a Hugging Face `config.json`. Every tensor
//! is a pure function of (seed, tensor name, element index): element i is
//! `bf16(offset + scale * (2u - 1))` with `u` the Philox uniform at counter i / 4, word i % 4,
//! keyed by a hash of the seed and the name. The CUDA backend draws the same formula on the
//! device (crates/cuda/kernels/dummy_init.cu), so both backends run bit-identical weights and
//! their logits can be compared.

mod eagle3;
pub mod philox;
mod presets;
pub mod quantized;

use std::path::Path;
use std::sync::Arc;

use half::bf16;
use rayon::prelude::*;

pub use self::eagle3::dummy_eagle3;
pub use self::presets::{preset, PRESET_NAMES};
use crate::config::{Arch, ModelConfig};
use crate::plan::{ModelPlan, MtpSpec, TensorRole, TensorSpec};
use crate::weights::{DType, ModelWeights, Storage, WeightTensor};

/// Half-width of the uniform draw of matrices: a standard deviation of 0.02 (the usual init),
/// which keeps activations finite through every layer.
pub const MATRIX_SCALE: f32 = 0.02 * 1.732_050_8;
/// Norm weights are 1 ± 0.1.
pub const NORM_SCALE: f32 = 0.1;

/// How one tensor is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInit {
    /// Canonical (GGUF) name.
    pub name: String,
    pub shape: Vec<usize>,
    /// Philox key of this tensor.
    pub key: u64,
    pub scale: f32,
    pub offset: f32,
    /// What the tensor is (a norm weight gets the plan's weight offset added at load).
    pub role: TensorRole,
}

impl TensorInit {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element `i`, widened to f32 (exact: it is a bf16 value).
    pub fn value(&self, i: usize) -> f32 {
        let words = philox::philox4x32_10(
            [(i / 4) as u32, ((i / 4) >> 32) as u32, 0, 0],
            [self.key as u32, (self.key >> 32) as u32],
        );
        self.value_of_word(words[i % 4])
    }
    fn value_of_word(&self, word: u32) -> f32 {
        let centred = 2.0 * philox::uniform(word) - 1.0;
        bf16::from_f32(self.offset + self.scale * centred).to_f32()
    }
    /// Every element as bf16 bits, in order.
    pub fn fill(&self, out: &mut [u16]) {
        let key = [self.key as u32, (self.key >> 32) as u32];
        for (group, chunk) in out.chunks_mut(4).enumerate() {
            let words = philox::philox4x32_10([group as u32, (group >> 32) as u32, 0, 0], key);
            for (slot, word) in chunk.iter_mut().zip(words) {
                *slot = bf16::from_f32(self.value_of_word(word)).to_bits();
            }
        }
    }
}

/// The shape a `--model` names under `--load-format dummy`: a preset, or a `config.json` (or a
/// directory holding one).
pub fn config_for(spec: &str) -> anyhow::Result<ModelConfig> {
    if let Some(config) = preset(spec) {
        return Ok(config);
    }
    let path = Path::new(spec);
    let file = if path.is_dir() {
        path.join("config.json")
    } else {
        path.to_path_buf()
    };
    if !file.is_file() {
        anyhow::bail!(
            "`{spec}` is neither a dummy preset ({}) nor a config.json",
            PRESET_NAMES.join(", ")
        );
    }
    let text = std::fs::read_to_string(&file)?;
    Ok(crate::load::hf_config(&text)?)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a of the name, mixed with the seed: one independent stream per tensor.
fn tensor_key(seed: u64, name: &str) -> u64 {
    let fnv = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    splitmix64(seed ^ fnv)
}

/// Spread of the dummy linear-attention decay rates around their -0.5.
const DECAY_SCALE: f32 = 0.25;

/// Every tensor the forward pass reads (`ModelPlan::tensors`), with how it is drawn; for the
/// Qwen hybrids, whose checkpoints all ship one, the multi-token-prediction layer's too
/// (`plan::MtpSpec`, for `--speculative mtp` on random weights).
pub fn tensor_inits(config: &ModelConfig, seed: u64) -> Vec<TensorInit> {
    let plan = ModelPlan::of(config);
    let mut inits = plan_inits(&plan, seed);
    if let Some(mtp) = dummy_mtp(config) {
        inits.extend(mtp_inits(&plan, &mtp, seed));
    }
    inits
}

/// The multi-token-prediction layer random weights of `config` carry: the Qwen hybrids'.
pub fn dummy_mtp(config: &ModelConfig) -> Option<MtpSpec> {
    (config.arch == Arch::Qwen3_5)
        .then(|| MtpSpec::of(config))
        .flatten()
}

/// [`tensor_inits`] of an MTP layer's tensors (`plan::MtpSpec::tensors`).
pub fn mtp_inits(plan: &ModelPlan, mtp: &MtpSpec, seed: u64) -> Vec<TensorInit> {
    spec_inits(plan, mtp.tensors(), seed)
}

/// [`tensor_inits`] of a plan already made (the decoder's tensors only).
pub fn plan_inits(plan: &ModelPlan, seed: u64) -> Vec<TensorInit> {
    spec_inits(plan, plan.tensors(), seed)
}

fn spec_inits(plan: &ModelPlan, specs: Vec<TensorSpec>, seed: u64) -> Vec<TensorInit> {
    // Norm scales come out near 1 as the model uses them: a family that stores `w` for a scale
    // of `1 + w` (gemma) gets `w` near 0, as its real checkpoints have. Scales near 2 would
    // double every normalised activation, an ill-conditioned model no real one resembles.
    let stored_norm = 1.0 - plan.norm.weight_offset;
    specs
        .into_iter()
        .map(|spec| {
            let (scale, offset) = match spec.role {
                TensorRole::Matrix | TensorRole::Bias => (MATRIX_SCALE, 0.0),
                TensorRole::Norm => (NORM_SCALE, stored_norm),
                TensorRole::Scale => (NORM_SCALE, 1.0),
                // Decay rates of about -0.5 per unit of step: states that forget over a few
                // tokens, as trained models' mix of fast and slow heads does on average.
                TensorRole::DecayRate => (DECAY_SCALE, -0.5),
            };
            TensorInit {
                key: tensor_key(seed, &spec.name),
                name: spec.name,
                shape: spec.shape,
                scale,
                offset,
                role: spec.role,
            }
        })
        .collect()
}

/// The dummy weights on the host, as BF16 tensors (for the CPU backend and for tests).
pub fn generate(config: &ModelConfig, seed: u64) -> ModelWeights {
    host_tensors(tensor_inits(config, seed))
}

/// `inits` drawn on the host as BF16 tensors.
fn host_tensors(inits: Vec<TensorInit>) -> ModelWeights {
    let tensors = inits
        .into_par_iter()
        .map(|init| {
            let mut bits = vec![0u16; init.len()];
            // Chunks of whole Philox groups, so parallel fills equal the serial formula.
            const CHUNK: usize = 1 << 16;
            bits.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
                let first = c * CHUNK;
                for (j, slot) in out.iter_mut().enumerate() {
                    *slot = bf16::from_f32(init.value(first + j)).to_bits();
                }
            });
            let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            let tensor = WeightTensor {
                dtype: DType::BF16,
                shape: init.shape.clone(),
                storage: Storage::Owned(Arc::new(bytes)),
            };
            (init.name, tensor)
        })
        .collect();
    ModelWeights { tensors }
}

#[cfg(test)]
mod tests;
