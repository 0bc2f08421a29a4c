//! Where a draft head's pass (crate::forward::mtp, crate::forward::eagle3) finds its hidden
//! rows and where it leaves the rows the next pass continues from, as device index arrays
//! (i32) the backend builds on the host (crate::backend's draft_head).

use super::Model;
use crate::device_ptr::DevicePtr;

#[derive(Debug, Clone, Copy)]
pub struct HeadRows {
    /// f32 rows kept between steps (the backend's ring of each slot's rows).
    pub ring: DevicePtr,
    /// f32 rows of the step a pair's `src >= 0` names: the target's final residual rows
    /// (MTP) or `fc` over its captured layer inputs (EAGLE-3).
    pub step_rows: DevicePtr,
    /// [pairs]: the step's row (>= 0) or kept row `-1 - i` of each pair.
    pub src: DevicePtr,
    /// [pairs], MTP only: 0 for a target's row, 1 for the MTP layer's own output.
    pub first_norm: DevicePtr,
    /// Rows copied into the ring: `copies` rows (`copy_src`) to kept rows (`copy_dst`). A
    /// catch-up keeps the target's rows, a draft step the head's own output.
    pub copy_src: DevicePtr,
    pub copy_dst: DevicePtr,
    pub copies: usize,
    /// bf16 [pairs, 2 hidden]: what the head's first product reads.
    pub input: DevicePtr,
}

impl Model<'_> {
    /// The rows `rows` names copied from `from` (f32 rows of hidden) into the ring.
    pub fn copy_to_ring(&self, rows: &HeadRows, from: DevicePtr) -> anyhow::Result<()> {
        let hidden = self.config.hidden_size;
        self.kernels.copy_rows(
            from,
            rows.copy_src,
            rows.ring,
            rows.copy_dst,
            hidden,
            rows.copies,
        )
    }
}
