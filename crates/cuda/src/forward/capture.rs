//! The target's hidden states an EAGLE-3 head reads, kept during the target's own step: the
//! residual stream at the input of three of its layers (`plan::Eagle3Options::aux_layers`),
//! side by side in one bf16 row per token, the head's `fc` input. Captured decode graphs
//! include the copies, so no extra pass runs for them.

use crate::device_ptr::DevicePtr;
use crate::launchers::Kernels;

#[derive(Debug, Clone, Copy)]
pub struct Capture {
    /// The layers whose input is kept, in the order `fc` reads them.
    pub layers: [usize; 3],
    /// bf16 [tokens, 3 hidden].
    pub rows: DevicePtr,
}

impl Capture {
    /// When `layer` is one of the kept layers: the step's `n` rows of `x` (f32, the layer's
    /// input) into their third of `rows`.
    pub fn layer_input(
        &self,
        kernels: &Kernels,
        layer: usize,
        x: DevicePtr,
        hidden: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        for (i, _) in self.layers.iter().enumerate().filter(|(_, &l)| l == layer) {
            kernels.capture_rows(x, self.rows, hidden, 3 * hidden, i * hidden, n)?;
        }
        Ok(())
    }
}
