//! Launcher of kernels/rmsnorm.cu: the residual add fused with RMSNorm.

use super::launch::{grid1, Args, Kernels};
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::add_rmsnorm`].
#[derive(Debug, Clone, Copy)]
pub struct AddRmsNormArgs {
    /// The f32 residual stream [tokens, hidden], updated in place when `delta` is given.
    pub x: DevicePtr,
    /// f32 [tokens, hidden] added into `x` first; `None` before the first layer.
    pub delta: Option<DevicePtr>,
    /// The f32 norm weight [hidden].
    pub weight: DevicePtr,
    /// i32 [n]: the rows of `x` to normalise; `None`: rows 0..n.
    pub rows: Option<DevicePtr>,
    /// bf16 [n, hidden].
    pub out: DevicePtr,
    pub hidden: usize,
    pub eps: f32,
    /// Output rows.
    pub n: usize,
}

impl Kernels {
    /// For `n` output rows: x[r] += delta[r] (when given), out[i] = rmsnorm(x[r]) * weight,
    /// r = rows[i] (when given) or i.
    pub fn add_rmsnorm(&self, a: &AddRmsNormArgs) -> anyhow::Result<()> {
        // add_rmsnorm(x, delta, weight, rows, out, hidden, eps)
        let args = Args::new()
            .ptr(a.x)
            .nullable_ptr(a.delta)
            .ptr(a.weight)
            .nullable_ptr(a.rows)
            .ptr(a.out)
            .usize(a.hidden)
            .f32(a.eps);
        self.launch("add_rmsnorm", grid1(a.n, 256), args)
    }
}
