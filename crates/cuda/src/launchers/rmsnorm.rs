//! Launchers of kernels/rmsnorm.cu: the residual add fused with RMSNorm, and RMSNorm in place
//! of f32 rows (per-head Q/K norms, post-attention and post-MLP norms).

use super::launch::{grid1, Kernels};
use super::signatures::{AddRmsNorm, RmsNormRows};
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::add_rmsnorm`].
#[derive(Debug, Clone, Copy)]
pub struct AddRmsNormArgs {
    /// The f32 residual stream [tokens, hidden], updated in place when `delta` is given.
    pub x: DevicePtr,
    /// f32 [tokens, hidden] added into `x` first; `None` before the first layer.
    pub delta: Option<DevicePtr>,
    /// f32 [hidden] added into every row of `x` with `delta` (the bias of the projection
    /// before the norm: gpt-oss's attention output).
    pub bias: Option<DevicePtr>,
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
    /// For `n` output rows: x[r] += delta[r] + bias (when given), out[i] = rmsnorm(x[r]) * weight,
    /// r = rows[i] (when given) or i.
    pub fn add_rmsnorm(&self, a: &AddRmsNormArgs) -> anyhow::Result<()> {
        let params = AddRmsNorm {
            x: a.x,
            delta: a.delta,
            weight: a.weight,
            rows: a.rows,
            out: a.out,
            hidden: a.hidden,
            eps: a.eps,
            bias: a.bias,
        };
        self.launch(grid1(a.n, 256), &params)
    }
}

/// Arguments of [`Kernels::rmsnorm_rows`]: `heads` rows of `dim` f32 values per token, the
/// first at `x`, the next token's `token_stride` floats further.
#[derive(Debug, Clone, Copy)]
pub struct RmsNormRowsArgs {
    /// f32, normalised in place.
    pub x: DevicePtr,
    /// f32 [dim].
    pub weight: DevicePtr,
    pub heads: usize,
    pub token_stride: usize,
    pub dim: usize,
    pub eps: f32,
    /// Tokens.
    pub n: usize,
}

impl Kernels {
    /// RMSNorm in place of `n * heads` f32 rows (per-head Q/K norm, or a post-attention /
    /// post-MLP norm with `heads` 1 and `dim` hidden).
    pub fn rmsnorm_rows(&self, a: &RmsNormRowsArgs) -> anyhow::Result<()> {
        let rows = a.n * a.heads;
        let params = RmsNormRows {
            x: a.x,
            weight: a.weight,
            rows,
            heads: a.heads,
            token_stride: a.token_stride,
            dim: a.dim,
            eps: a.eps,
        };
        // One warp per row, four rows per block.
        self.launch(grid1(rows.div_ceil(4), 128), &params)
    }
}
