//! Launcher of kernels/silu_mul.cu.

use super::launch::{Args, Kernels, Shape};
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// out[t, j] = silu(gate_up[t, j]) * gate_up[t, inter + j] (f32 -> bf16) for `n` tokens.
    pub fn silu_mul(
        &self,
        gate_up: DevicePtr,
        out: DevicePtr,
        inter: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let threads = 256usize;
        let shape = Shape {
            grid: ((inter / 4).div_ceil(threads) as u32, n as u32, 1),
            block: threads as u32,
        };
        // silu_mul(gate_up, out, inter)
        let args = Args::new().ptr(gate_up).ptr(out).usize(inter);
        self.launch("silu_mul", shape, args)
    }
}
