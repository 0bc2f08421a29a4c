//! Launchers of kernels/moe.cu: a mixture-of-experts MLP's routing, grouping, expert products
//! and combination, each grid fixed by the token count so that decode graphs capture them.

use super::launch::{grid1, Args, Kernels, Shape};
use super::names::{MOE_EXPERT_NAMES, QGEMV_SPLITS};
use super::quant::split_index;
use crate::device_ptr::DevicePtr;

/// Most experts the routing kernel takes (a warp holds 8 logits a lane).
pub const MOE_MAX_EXPERTS: usize = 256;
/// Most experts a token is routed to.
pub const MOE_MAX_K: usize = 8;
/// Rows of one expert per work item of the expert products (the mma's 8 columns).
pub const MOE_CHUNK: usize = 8;

/// Work items a step of `choices` routed rows can need: one per started chunk of each expert's
/// rows, at most `choices / MOE_CHUNK` full ones plus one partial per expert that has rows.
pub fn moe_max_items(choices: usize, experts: usize) -> usize {
    choices / MOE_CHUNK + choices.min(experts)
}

/// Device buffers of one step's routing (crate::workspace).
#[derive(Debug, Clone, Copy)]
pub struct MoeRouting {
    /// i32 [n, k] and f32 [n, k]: each token's experts (by id) and weights.
    pub ids: DevicePtr,
    pub weights: DevicePtr,
    /// i32 [n k]: a choice's row in the grouped order, and a grouped row's token.
    pub row_of_choice: DevicePtr,
    pub token_of_row: DevicePtr,
    /// int4 [moe_max_items]: (expert, first grouped row, rows, 0).
    pub items: DevicePtr,
}

/// One expert product over every routed row: y[row] = W_e[row's expert] x[row].
#[derive(Debug, Clone, Copy)]
pub struct MoeProductArgs {
    /// Stacked bf16 experts [experts, split_row, k], and [experts, rows - split_row, k].
    pub w_lo: DevicePtr,
    pub w_hi: DevicePtr,
    pub split_row: usize,
    /// bf16 input rows of `k`; `x_rows` maps a grouped row to its row of x (None: the same).
    pub x: DevicePtr,
    pub x_rows: Option<DevicePtr>,
    /// f32 [routed rows, rows].
    pub y: DevicePtr,
    pub rows: usize,
    pub k: usize,
    /// Routed rows (n k).
    pub choices: usize,
    pub experts: usize,
}

impl Kernels {
    /// Each of `n` tokens' top-`k` experts from its router logits (f32 [n, experts]).
    pub fn moe_route(
        &self,
        logits: DevicePtr,
        experts: usize,
        k: usize,
        normalize: bool,
        n: usize,
        r: &MoeRouting,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(experts <= MOE_MAX_EXPERTS && (1..=MOE_MAX_K.min(experts)).contains(&k));
        // moe_route(logits, experts, k, normalize, n, ids, weights)
        let args = Args::new()
            .ptr(logits)
            .usize(experts)
            .usize(k)
            .i32(i32::from(normalize))
            .usize(n)
            .ptr(r.ids)
            .ptr(r.weights);
        self.launch("moe_route", grid1(n.div_ceil(8), 256), args)
    }

    /// The `n k` choices grouped by expert, and the work items; `load` (u64 [experts]) gets each
    /// expert's routed rows added when given.
    pub fn moe_group(
        &self,
        r: &MoeRouting,
        n: usize,
        k: usize,
        experts: usize,
        load: Option<DevicePtr>,
    ) -> anyhow::Result<()> {
        let choices = n * k;
        // moe_group(ids, total, k, experts, row_of_choice, token_of_row, items, max_items, load)
        let args = Args::new()
            .ptr(r.ids)
            .usize(choices)
            .usize(k)
            .usize(experts)
            .ptr(r.row_of_choice)
            .ptr(r.token_of_row)
            .ptr(r.items)
            .usize(moe_max_items(choices, experts))
            .nullable_ptr(load);
        self.launch("moe_group", grid1(1, 256), args)
    }

    /// One launch for every expert's rows. The split along k depends on the shape alone (not on
    /// how many rows an expert got), so each row's sum order is fixed.
    pub fn moe_experts(&self, a: &MoeProductArgs, items: DevicePtr) -> anyhow::Result<()> {
        anyhow::ensure!(a.k.is_multiple_of(8), "expert products need k % 8 == 0");
        let split = split_index(a.rows.div_ceil(16), a.k.div_ceil(128), 4);
        let rows_per_block = 16 * 8 / QGEMV_SPLITS[split];
        let shape = Shape {
            grid: (
                a.rows.div_ceil(rows_per_block) as u32,
                moe_max_items(a.choices, a.experts) as u32,
                1,
            ),
            block: 256,
        };
        // moe_experts_s<split>(w_lo, w_hi, split_row, x, x_rows, items, y, rows, k, ldy)
        let args = Args::new()
            .ptr(a.w_lo)
            .ptr(a.w_hi)
            .usize(a.split_row)
            .ptr(a.x)
            .nullable_ptr(a.x_rows)
            .ptr(items)
            .ptr(a.y)
            .usize(a.rows)
            .usize(a.k)
            .usize(a.rows);
        self.launch(MOE_EXPERT_NAMES[split], shape, args)
    }

    /// out[t] (f32 [n, hidden]) = the weighted sum of token t's expert outputs `ys` (f32
    /// [n k, hidden], grouped order), plus sigmoid(score[t]) * shared[t] when `shared` is
    /// (output f32 [n, hidden], score f32 [n]).
    #[allow(clippy::too_many_arguments)]
    pub fn moe_combine(
        &self,
        ys: DevicePtr,
        r: &MoeRouting,
        k: usize,
        hidden: usize,
        shared: Option<(DevicePtr, DevicePtr)>,
        out: DevicePtr,
        n: usize,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(hidden.is_multiple_of(4));
        let shape = Shape {
            grid: ((hidden / 4).div_ceil(256) as u32, n as u32, 1),
            block: 256,
        };
        // moe_combine(ys, row_of_choice, weights, k, hidden, shared_out, shared_score, out)
        let args = Args::new()
            .ptr(ys)
            .ptr(r.row_of_choice)
            .ptr(r.weights)
            .usize(k)
            .usize(hidden)
            .nullable_ptr(shared.map(|s| s.0))
            .nullable_ptr(shared.map(|s| s.1))
            .ptr(out);
        self.launch("moe_combine", shape, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_items_cover_every_grouping() {
        // Worst case: every expert gets a partial chunk besides the full ones.
        let (experts, k) = (128usize, 8usize);
        for n in [1usize, 3, 16, 64, 257] {
            let choices = n * k;
            let bound = moe_max_items(choices, experts);
            // Spread the choices as evenly as possible over min(choices, experts) experts.
            let used = choices.min(experts);
            let items: usize = (0..used)
                .map(|e| (choices / used + usize::from(e < choices % used)).div_ceil(MOE_CHUNK))
                .sum();
            assert!(items <= bound, "n {n}: {items} items > bound {bound}");
        }
    }
}
