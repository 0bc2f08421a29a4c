//! The GPU a backend runs on: its context, the one stream every step is ordered on, and what
//! the kernels' launch shapes depend on (multiprocessor count).

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream};

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    /// All work of a step goes on this stream, in order: no cross-stream events are needed.
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub sm_count: usize,
    pub compute_capability: (i32, i32),
}

impl Gpu {
    /// Opens device `ordinal`. Fails with the loader's message when there is no CUDA driver.
    pub fn open(ordinal: usize) -> anyhow::Result<Gpu> {
        // cudarc panics when libcuda.so cannot be loaded: turn that into an error, quietly.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let opened = std::panic::catch_unwind(|| CudaContext::new(ordinal));
        std::panic::set_hook(hook);
        let ctx = opened
            .map_err(|_| {
                anyhow::anyhow!(
                    "cannot load the CUDA driver (libcuda.so): is this a machine with an \
                     NVIDIA GPU and driver?"
                )
            })?
            .map_err(|e| anyhow::anyhow!("cannot open CUDA device {ordinal}: {e}"))?;
        // We order our own work on one stream; cudarc's per-argument events would only cost.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let sm_count =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
        let compute_capability = ctx.compute_capability()?;
        let name = ctx.name()?;
        Ok(Gpu {
            ctx,
            stream,
            name,
            sm_count,
            compute_capability,
        })
    }

    /// (free, total) bytes of device memory.
    pub fn memory(&self) -> anyhow::Result<(usize, usize)> {
        Ok(self.ctx.mem_get_info()?)
    }

    /// Makes this context current on the calling thread (the scheduler thread calls the
    /// backend, but the backend was built on another thread).
    pub fn bind(&self) -> anyhow::Result<()> {
        Ok(self.ctx.bind_to_thread()?)
    }

    pub fn synchronize(&self) -> anyhow::Result<()> {
        Ok(self.stream.synchronize()?)
    }
}

/// Whether a CUDA device can be opened here (tests print why they skip when not).
pub fn probe() -> Result<String, String> {
    match Gpu::open(0) {
        Ok(gpu) => Ok(format!(
            "{} (sm_{}{}, {} SMs)",
            gpu.name, gpu.compute_capability.0, gpu.compute_capability.1, gpu.sm_count
        )),
        Err(e) => Err(e.to_string()),
    }
}
