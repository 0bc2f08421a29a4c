//! Launcher of kernels/dummy_init.cu: `--load-format dummy` weights drawn on the device.

use super::launch::{grid1, Args, Kernels};
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// Fills `n` elements at `out` with the dummy-weight formula (bf16, or f32 when `f32_out`).
    pub fn dummy_fill(
        &self,
        out: DevicePtr,
        n: usize,
        key: u64,
        scale: f32,
        offset: f32,
        f32_out: bool,
    ) -> anyhow::Result<()> {
        let name = if f32_out {
            "dummy_fill_f32"
        } else {
            "dummy_fill_bf16"
        };
        let groups = n.div_ceil(4);
        let blocks = groups.div_ceil(256).clamp(1, 65_535);
        // dummy_fill_*(out, n, seed, scale, offset)
        let args = Args::new()
            .ptr(out)
            .u64(n as u64)
            .u64(key)
            .f32(scale)
            .f32(offset);
        self.launch(name, grid1(blocks, 256), args)
    }
}
