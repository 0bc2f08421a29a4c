//! Launcher of kernels/dummy_init.cu: `--load-format dummy` weights drawn on the device.

use super::launch::{grid1, Kernels};
use super::signatures::{DummyFillBf16, DummyFillF32};
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
        let shape = grid1(groups.div_ceil(256).clamp(1, 65_535), 256);
        let n = n as u64;
        match format {
            DummyFormat::Bf16 => {
                let params = DummyFillBf16 {
                    out,
                    n,
                    seed: key,
                    scale,
                    offset,
                };
                self.launch(shape, &params)
            }
            DummyFormat::F32 { shift } => {
                let params = DummyFillF32 {
                    out,
                    n,
                    seed: key,
                    scale,
                    offset,
                    shift,
                };
                self.launch(shape, &params)
            }
        }
    }
}
