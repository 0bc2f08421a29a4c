//! What each device's backend takes when the flags leave a setting out: the one place where
//! the CPU and CUDA defaults differ.

use crate::cli::Device;

/// A device's defaults for the engine flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceDefaults {
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: usize,
    /// `--prefill-per-decode` (0: prompts take whole chunks).
    pub prefill_per_decode: usize,
    /// `--speculative-disable-by-batch-size` (`None`: speculation at any batch size).
    pub spec_disable_by_batch_size: Option<usize>,
    /// `--kv-cache-memory`; `None`: what is left of the device's memory once the model is
    /// loaded, asked of the backend.
    pub kv_cache_bytes: Option<usize>,
}

/// On a CPU a step's time grows with its tokens, so prompts are fed in small chunks beside
/// decodes: 3 is the largest ratio that kept arriving prompts from stretching the streams'
/// tail inter-token latency past its bound (docs/performance.md, '2026-12-04 23:58 - 2026-12-05
/// 00:05 UTC, `--prefill-per-decode 3` on the CPU'). Speculation paid alone and lost
/// throughput at every measured concurrency above that (bench/spec_cpu.sh,
/// docs/performance.md), so it stops at 2 sequences.
const CPU: DeviceDefaults = DeviceDefaults {
    max_num_batched_tokens: 2048,
    prefill_per_decode: 3,
    spec_disable_by_batch_size: Some(2),
    kv_cache_bytes: Some(1 << 30),
};

/// A GPU runs a few hundred tokens in the time of one, so prompts take whole chunks; a prompt
/// in two chunks takes longer than in one when the weights are quantized, since each chunk
/// dequantizes every matrix again, hence the large budget (measured: docs/performance.md,
/// '2026-12-04 12:45-12:59 UTC: start-up warm-up, the CUDA token budget, same-run peers').
const CUDA: DeviceDefaults = DeviceDefaults {
    max_num_batched_tokens: 8192,
    prefill_per_decode: 0,
    spec_disable_by_batch_size: None,
    kv_cache_bytes: None,
};

impl Device {
    pub fn defaults(self) -> DeviceDefaults {
        match self {
            Device::Cpu => CPU,
            Device::Cuda => CUDA,
        }
    }
}
