//! The expert-load metric on the GPU (`--expert-load-metrics`): `moe_route_group` adds each
//! sparse layer's routed rows per expert to device counters (a decode graph's padding rows
//! excluded), and after every step the backend reads them back and adds what is new to the
//! engine's `ExpertLoad`, which /metrics exports as the CPU backend's counts are.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_engine::ExpertLoad;
use ferrite_model::config::ModelConfig;

use crate::buffer::{download, DeviceBuffer};
use crate::device_ptr::DevicePtr;

pub struct DeviceExpertLoad {
    /// u64 [layers, experts], only ever added to on the device.
    counts: DeviceBuffer,
    experts: usize,
    /// The counts as last read, and the engine's counters the differences go to.
    seen: Vec<u64>,
    now: Vec<u64>,
    host: Arc<ExpertLoad>,
}

impl DeviceExpertLoad {
    /// Counters for a mixture-of-experts model; `None` for a dense one.
    pub fn new(stream: &Arc<CudaStream>, c: &ModelConfig) -> anyhow::Result<Option<Self>> {
        let Some(moe) = &c.moe else { return Ok(None) };
        let (layers, experts) = (c.num_layers, moe.num_experts);
        let counts = DeviceBuffer::new(stream, layers * experts * 8)?;
        counts.fill(0)?;
        let per_layer = (0..layers).map(|l| if c.moe_at(l).is_some() { experts } else { 0 });
        Ok(Some(DeviceExpertLoad {
            counts,
            experts,
            seen: vec![0; layers * experts],
            now: vec![0; layers * experts],
            host: Arc::new(ExpertLoad::new(per_layer)),
        }))
    }

    /// Layer `layer`'s counters, u64 [experts].
    pub fn layer(&self, layer: usize) -> DevicePtr {
        self.counts.at(layer * self.experts * 8)
    }

    pub fn counters(&self) -> Arc<ExpertLoad> {
        Arc::clone(&self.host)
    }

    /// Adds what the device counted since the last call to the engine's counters (a copy of
    /// layers x experts x 8 bytes: 49 KB for Qwen3-30B-A3B).
    pub fn flush(&mut self, stream: &CudaStream) -> anyhow::Result<()> {
        download(stream, self.counts.ptr(), &mut self.now)?;
        for (layer, now) in self.now.chunks_exact(self.experts).enumerate() {
            let counters = self.host.layer(layer);
            let seen = &self.seen[layer * self.experts..];
            for ((counter, &now), &seen) in counters.iter().zip(now).zip(seen) {
                if now > seen {
                    counter.fetch_add(now - seen, Ordering::Relaxed);
                }
            }
        }
        std::mem::swap(&mut self.seen, &mut self.now);
        Ok(())
    }

    /// Forgets what was counted so far (the start-up warm-up's tokens are no one's).
    pub fn reset(&mut self, stream: &CudaStream) -> anyhow::Result<()> {
        download(stream, self.counts.ptr(), &mut self.seen)?;
        Ok(())
    }
}
