//! Launcher of kernels/gated_activation.cu: the MLP's act(gate) * up, SwiGLU or GeGLU.

use ferrite_model::config::Activation;

use super::launch::{Args, Kernels, Shape};
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// out[t, j] = act(gate_up[t, j]) * gate_up[t, inter + j] (f32 -> bf16) for `n` tokens,
    /// act = SiLU or tanh-approximated GELU.
    pub fn gated_activation(
        &self,
        activation: Activation,
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
        let name = match activation {
            Activation::Silu => "silu_mul",
            Activation::GeluTanh => "gelu_tanh_mul",
        };
        // silu_mul / gelu_tanh_mul(gate_up, out, inter)
        let args = Args::new().ptr(gate_up).ptr(out).usize(inter);
        self.launch(name, shape, args)
    }
}
