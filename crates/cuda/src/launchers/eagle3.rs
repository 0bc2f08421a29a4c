//! Launchers of kernels/eagle3.cu: the target's layer inputs captured for an EAGLE-3 head,
//! the head's input rows, and its draft-vocabulary logits spread over the target's vocabulary.

use super::launch::{grid1, Kernels};
use super::signatures::{CaptureRows, Eagle3Input, ScatterDraftLogits};
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::eagle3_input`].
#[derive(Debug, Clone, Copy)]
pub struct Eagle3InputArgs {
    /// f32 [n, hidden]: each pair's token embedding.
    pub emb: DevicePtr,
    /// f32 rows `g` of the step (fc over the captured layer inputs), read where `src[r] >= 0`.
    pub step_rows: DevicePtr,
    /// f32 kept rows, read as row `-1 - src[r]` where `src[r] < 0`.
    pub ring: DevicePtr,
    /// i32 [n]: each pair's hidden row.
    pub src: DevicePtr,
    pub input_norm: DevicePtr,
    pub hidden_norm: DevicePtr,
    /// bf16 [n, 2 hidden]: what the head's Q, K and V read.
    pub out: DevicePtr,
    /// f32 [n, hidden]: the head's residual stream.
    pub resid: DevicePtr,
    pub hidden: usize,
    pub eps: f32,
    pub residual_normed: bool,
    pub n: usize,
}

impl Kernels {
    /// out[r, col..col + hidden] = bf16(x[r]) for `n` rows of `hidden` f32, rows of `out`
    /// `ld` wide.
    pub fn capture_rows(
        &self,
        x: DevicePtr,
        out: DevicePtr,
        hidden: usize,
        ld: usize,
        col: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let params = CaptureRows {
            x,
            out,
            hidden,
            ld,
            col,
        };
        self.launch(grid1(n, 256), &params)
    }

    /// The head's input rows `[input_norm(emb); hidden_norm(g)]` and residual rows.
    pub fn eagle3_input(&self, a: &Eagle3InputArgs) -> anyhow::Result<()> {
        let params = Eagle3Input {
            emb: a.emb,
            step_rows: a.step_rows,
            ring: a.ring,
            src: a.src,
            input_norm_w: a.input_norm,
            hidden_norm_w: a.hidden_norm,
            out: a.out,
            resid: a.resid,
            hidden: a.hidden,
            eps: a.eps,
            residual_normed: i32::from(a.residual_normed),
        };
        self.launch(grid1(a.n, 256), &params)
    }

    /// Rows of `logits` ([vocab] f32 each) set to -inf but at the draft vocabulary's target
    /// ids `d2t` (i32 [draft_vocab]), which get `draft`'s rows ([draft_vocab] f32 each).
    pub fn scatter_draft_logits(
        &self,
        draft: DevicePtr,
        d2t: DevicePtr,
        logits: DevicePtr,
        draft_vocab: usize,
        vocab: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let params = ScatterDraftLogits {
            draft,
            d2t,
            logits,
            draft_vocab,
            vocab,
        };
        self.launch(grid1(n, 256), &params)
    }
}
