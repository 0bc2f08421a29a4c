//! Launcher of kernels/gated_activation.cu: the MLP's act(gate) * up, SwiGLU or GeGLU.

use ferrite_model::config::Activation;

use super::launch::{Kernels, Shape};
use super::signatures::GatedActivation;
use crate::device_ptr::DevicePtr;

impl Kernels {
    /// out[t, j] = act(gate_up[t, j]) * gate_up[t, inter + j] (f32, or bf16 when
    /// `gate_up_bf16`, -> bf16) for `n` tokens, act = SiLU or tanh-approximated GELU.
    pub fn gated_activation(
        &self,
        activation: Activation,
        gate_up: DevicePtr,
        gate_up_bf16: bool,
        out: DevicePtr,
        inter: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let threads = 256usize;
        let shape = Shape {
            grid: ((inter / 4).div_ceil(threads) as u32, n as u32, 1),
            block: threads as u32,
        };
        let kernel = match (activation, gate_up_bf16) {
            (Activation::Silu, false) => GatedActivation::SILU,
            (Activation::GeluTanh, false) => GatedActivation::GELU_TANH,
            (Activation::Silu, true) => GatedActivation::SILU_BF16,
            (Activation::GeluTanh, true) => GatedActivation::GELU_TANH_BF16,
            (Activation::ClampedSwiglu, _) => {
                anyhow::bail!("the clamped SwiGLU has no CUDA kernel (support.rs refuses it)")
            }
        };
        let params = GatedActivation {
            kernel,
            gate_up,
            out,
            inter,
        };
        self.launch(shape, &params)
    }
}
