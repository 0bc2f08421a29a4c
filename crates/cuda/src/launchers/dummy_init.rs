//! Launcher of kernels/dummy_init.cu: `--load-format dummy` weights drawn on the device.

use super::launch::{grid1, Args, Kernels};
use crate::device_ptr::DevicePtr;

/// How [`Kernels::dummy_fill`] stores the drawn values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DummyFormat {
    Bf16,
    /// Widened to f32, then `shift` added.
    F32 {
        shift: f32,
    },
}

impl Kernels {
    /// Fills `n` elements at `out` with the dummy-weight formula: bf16, or f32 (`F32 { shift }`,
    /// with `shift` added after the bf16 rounding: a norm weight offset folded at load).
    pub fn dummy_fill(
        &self,
        out: DevicePtr,
        n: usize,
        key: u64,
        scale: f32,
        offset: f32,
        format: DummyFormat,
    ) -> anyhow::Result<()> {
        let groups = n.div_ceil(4);
        let blocks = groups.div_ceil(256).clamp(1, 65_535);
        // dummy_fill_bf16(out, n, seed, scale, offset)
        // dummy_fill_f32(out, n, seed, scale, offset, shift)
        let args = Args::new()
            .ptr(out)
            .u64(n as u64)
            .u64(key)
            .f32(scale)
            .f32(offset);
        let (name, args) = match format {
            DummyFormat::Bf16 => ("dummy_fill_bf16", args),
            DummyFormat::F32 { shift } => ("dummy_fill_f32", args.f32(shift)),
        };
        self.launch(name, grid1(blocks, 256), args)
    }
}
