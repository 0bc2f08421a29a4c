//! The memory check: the weights as the chosen backend holds them, plus the K/V of one
//! sequence of `--max-model-len` tokens (the model's trained context by default), against the
//! device's memory (or `--memory`).

use ferrite_model::config::ModelConfig;
use ferrite_model::plan::{Mixer, ModelPlan};
use ferrite_model::weights::{DType, ModelWeights, WeightTensor};

use super::report::Check;
use crate::cli::Device;

const NAME: &str = "memory";

/// What serving the model takes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub weights: u64,
    pub kv_per_token: u64,
    /// The recurrent state of one sequence (linear-attention layers; 0 without).
    pub state: u64,
    pub tokens: u64,
    /// Kept free for CUDA graphs and libraries (the CUDA backend's reserve).
    pub reserve: u64,
}

impl Need {
    pub fn total(&self) -> u64 {
        self.weights + self.kv() + self.state + self.reserve
    }

    fn kv(&self) -> u64 {
        self.kv_per_token * self.tokens
    }

    /// The longest context that fits `bytes`, if the rest fits at all.
    fn tokens_that_fit(&self, bytes: u64) -> Option<u64> {
        let fixed = self.weights + self.state + self.reserve;
        (bytes > fixed && self.kv_per_token > 0).then(|| (bytes - fixed) / self.kv_per_token)
    }
}

/// The memory to fit in.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub bytes: u64,
    /// Free now, where the device says.
    pub free: Option<u64>,
    /// Where `bytes` comes from, for the message.
    pub what: String,
}

/// The CUDA backend keeps this much of the device free (`ferrite_cuda`'s RESERVE_BYTES).
const CUDA_RESERVE: u64 = 512 << 20;

/// What `config` with `weights` needs on `device` for a context of `tokens`.
pub fn need(config: &ModelConfig, weights: &ModelWeights, device: Device, tokens: usize) -> Need {
    let plan = ModelPlan::of(config);
    let (kv_per_token, reserve) = match device {
        // The CPU keeps K and V in f32 for the attention layers that have their own pages
        // (`CpuBackend::kv_bytes_per_token`).
        Device::Cpu => {
            let floats: usize = plan
                .layers
                .iter()
                .map(|l| match &l.mixer {
                    Mixer::Attention(a) if a.kv_source.is_none() => a.num_kv_heads * a.head_dim,
                    Mixer::Attention(_) | Mixer::LinearAttention(_) => 0,
                })
                .sum();
            (2 * floats * 4, 0)
        }
        Device::Cuda => (
            ferrite_cuda::kv_cache::bytes_per_token(config),
            CUDA_RESERVE,
        ),
    };
    let state_floats: usize = plan
        .layers
        .iter()
        .map(|l| match &l.mixer {
            Mixer::LinearAttention(g) => g.state_len(),
            Mixer::Attention(_) => 0,
        })
        .sum();
    Need {
        weights: weights
            .tensors
            .values()
            .map(|t| device_bytes(t, device))
            .sum(),
        kv_per_token: kv_per_token as u64,
        state: state_floats as u64 * 4,
        tokens: tokens as u64,
        reserve,
    }
}

/// A tensor's bytes as `device` holds it: the CPU reads the file's bytes (mapped); CUDA keeps
/// the formats its kernels read (bf16, the block formats of `QuantType`, MXFP4 expert stacks)
/// and widens the others to bf16.
fn device_bytes(t: &WeightTensor, device: Device) -> u64 {
    let stored = t.storage.bytes().len() as u64;
    if device == Device::Cpu || t.shape.len() < 2 || t.dtype == DType::BF16 {
        return stored;
    }
    let kept = if t.shape.len() == 3 {
        t.dtype == DType::Mxfp4
    } else {
        ferrite_cuda::quant::QuantType::of(t.dtype).is_some_and(|q| q.fits(t.cols()))
    };
    if kept {
        stored
    } else {
        t.shape.iter().product::<usize>() as u64 * 2
    }
}

pub fn check(need: &Need, budget: &Budget) -> Check {
    let parts = {
        let mut parts = format!(
            "weights {} + K/V of {} tokens {}",
            human(need.weights),
            need.tokens,
            human(need.kv())
        );
        if need.state > 0 {
            parts.push_str(&format!(" + recurrent state {}", human(need.state)));
        }
        if need.reserve > 0 {
            parts.push_str(&format!(" + reserve {}", human(need.reserve)));
        }
        parts
    };
    let total = need.total();
    if total > budget.bytes {
        let fix = match need.tokens_that_fit(budget.bytes) {
            Some(fit) if fit >= 2 => format!(
                "serve with --max-model-len {fit} or less (what fits), a more quantized file, \
                 or a device with more memory"
            ),
            _ => "the weights alone do not fit: a more quantized file (Q4_K_M is about a \
                  quarter of bf16) or a device with more memory"
                .to_string(),
        };
        return Check::error(
            NAME,
            format!(
                "too large: needs {} ({parts}); {}: {}",
                human(total),
                budget.what,
                human(budget.bytes)
            ),
            fix,
        );
    }
    if let Some(free) = budget.free.filter(|&free| total > free) {
        return Check::warning(
            NAME,
            format!(
                "needs {} ({parts}); {}: {}, but only {} is free now",
                human(total),
                budget.what,
                human(budget.bytes),
                human(free)
            ),
            "stop what else uses the memory, or serve a shorter --max-model-len",
        );
    }
    Check::ok(
        NAME,
        format!(
            "needs {} ({parts}); {}: {}",
            human(total),
            budget.what,
            human(budget.bytes)
        ),
    )
}

/// The device's memory: `--memory` when given, else this machine's (CPU) or the GPU's share
/// that `--gpu-memory-utilization` allows.
pub fn budget(
    device: Device,
    memory: Option<usize>,
    gpu_memory_utilization: f64,
) -> anyhow::Result<Budget> {
    if let Some(bytes) = memory {
        return Ok(Budget {
            bytes: bytes as u64,
            free: None,
            what: "--memory".into(),
        });
    }
    match device {
        Device::Cpu => {
            let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| {
                anyhow::anyhow!("cannot read /proc/meminfo ({e}): give --memory BYTES")
            })?;
            let (total, available) = meminfo(&text)
                .ok_or_else(|| anyhow::anyhow!("/proc/meminfo has no MemTotal: give --memory"))?;
            Ok(Budget {
                bytes: total,
                free: available,
                what: "this machine's memory".into(),
            })
        }
        Device::Cuda => {
            let gpu = ferrite_cuda::device::Gpu::open(0)?;
            let (free, total) = gpu.memory()?;
            Ok(Budget {
                bytes: (total as f64 * gpu_memory_utilization) as u64,
                free: Some(free as u64),
                what: format!(
                    "the GPU budget (--gpu-memory-utilization {gpu_memory_utilization} of the \
                     {}'s {})",
                    gpu.name,
                    human(total as u64)
                ),
            })
        }
    }
}

/// MemTotal and MemAvailable of /proc/meminfo, in bytes.
fn meminfo(text: &str) -> Option<(u64, Option<u64>)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("MemTotal:")?, field("MemAvailable:")))
}

/// `1.50 GiB`, `96.0 MiB`.
pub fn human(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

#[cfg(test)]
mod tests;
