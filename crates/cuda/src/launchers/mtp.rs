//! Launchers of kernels/mtp.cu: a multi-token-prediction layer's input rows, and copies of
//! hidden-state rows by index.

use super::launch::{grid1, Kernels};
use super::signatures::{CopyRows, MtpInput};
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::mtp_input`].
#[derive(Debug, Clone, Copy)]
pub struct MtpInputArgs {
    /// f32 [n, hidden]: each pair's token embedding.
    pub emb: DevicePtr,
    /// f32 rows of the step's residual stream, read where `src[r] >= 0`.
    pub step_rows: DevicePtr,
    /// f32 kept rows, read as row `-1 - src[r]` where `src[r] < 0`.
    pub ring: DevicePtr,
    /// i32 [n]: each pair's hidden row.
    pub src: DevicePtr,
    /// i32 [n]: 0 where the row is the target's (its final norm first), 1 where it is the
    /// MTP layer's own output (its output norm first).
    pub first_norm: DevicePtr,
    pub output_norm: DevicePtr,
    pub head_norm: DevicePtr,
    pub enorm: DevicePtr,
    pub hnorm: DevicePtr,
    /// bf16 [n, 2 hidden].
    pub out: DevicePtr,
    pub hidden: usize,
    pub eps: f32,
    pub n: usize,
}

impl Kernels {
    /// out[r] = [enorm(emb[r]); hnorm(first(h[r]))] as bf16.
    pub fn mtp_input(&self, a: &MtpInputArgs) -> anyhow::Result<()> {
        let params = MtpInput {
            emb: a.emb,
            step_rows: a.step_rows,
            ring: a.ring,
            src: a.src,
            first_norm: a.first_norm,
            output_norm_w: a.output_norm,
            head_norm_w: a.head_norm,
            enorm_w: a.enorm,
            hnorm_w: a.hnorm,
            out: a.out,
            hidden: a.hidden,
            eps: a.eps,
        };
        self.launch(grid1(a.n, 256), &params)
    }

    /// dst[dst_rows[i]] = src[src_rows[i]] for `n` rows of `hidden` f32 values (the index
    /// arrays i32 [n] on the device).
    pub fn copy_rows(
        &self,
        src: DevicePtr,
        src_rows: DevicePtr,
        dst: DevicePtr,
        dst_rows: DevicePtr,
        hidden: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let params = CopyRows {
            src,
            src_rows,
            dst,
            dst_rows,
            hidden,
        };
        self.launch(grid1(n, 256), &params)
    }
}
