//! Launchers of kernels/moe.cu, moe_experts.cu and moe_tile.cu: a mixture-of-experts MLP's
//! routing, grouping, expert products (bf16, MXFP4 or GGUF block-type weights) and
//! combination, each grid fixed by the token count so that decode graphs capture them.

use super::expert_format::{ExpertFormat, ExpertMatrix};
use super::launch::{grid1, Kernels, Shape};
use super::names::{
    moe_down_name, moe_gate_up_name, moe_tile_down_name, moe_tile_gate_up_name, QGEMV_SPLITS,
    TILE_MMA_ROWS, TILE_MMA_SHARED_BYTES,
};
use super::quant::split_index;
use super::signatures::{
    MoeCombine, MoeDown, MoeGateUp, MoeGroup, MoeRoute, MoeTileDown, MoeTileGateUp,
};
use crate::device_ptr::DevicePtr;

/// Most experts the routing kernel takes (a warp holds 8 logits a lane).
pub const MOE_MAX_EXPERTS: usize = 256;
/// Most experts a token is routed to.
pub const MOE_MAX_K: usize = 8;
/// Rows of one expert per work item of the expert products: 8 (one mma fragment of columns)
/// or 32 (four, for steps where experts get many rows: each weight is then read a quarter as
/// often) in moe_experts.cu's skinny products, or 128 in moe_tile.cu's tiles (prefill chunks:
/// weights staged through shared memory, read once per 128 rows). An output's sums are the
/// same in all three (an mma column's do not depend on the others, and the tiles sum in the
/// skinny kernels' order), so the choice, made from the step's size, does not change a
/// token's result.
pub const MOE_CHUNKS: [usize; 3] = [8, 32, 128];

/// The work-item size of a step of `routed` rows over `experts` experts: 32 rows once the
/// experts average 16 each, the tiles once they average 64.
pub fn moe_chunk(routed: usize, experts: usize) -> usize {
    if routed >= 64 * experts {
        MOE_CHUNKS[2]
    } else if routed >= 16 * experts {
        MOE_CHUNKS[1]
    } else {
        MOE_CHUNKS[0]
    }
}

/// The item size of moe_tile.cu's kernels.
const TILE_CHUNK: usize = MOE_CHUNKS[2];

/// Work items a step of `choices` routed rows can need with items of `chunk` rows: at most
/// `choices / chunk` full ones plus one partial per expert that has rows.
pub fn moe_max_items(choices: usize, experts: usize, chunk: usize) -> usize {
    choices / chunk + choices.min(experts)
}

fn chunk_index(chunk: usize) -> anyhow::Result<usize> {
    MOE_CHUNKS
        .iter()
        .position(|&c| c == chunk)
        .ok_or_else(|| anyhow::anyhow!("no expert kernels for items of {chunk} rows"))
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

/// Where the expert-load metric counts: u64 [experts] counters, and the step's KV slot per
/// token (i32, -1 for a graph's padding rows, which are not counted).
#[derive(Debug, Clone, Copy)]
pub struct ExpertCounters {
    pub counts: DevicePtr,
    pub slots: DevicePtr,
}

/// The experts' activation: SwiGLU, or gpt-oss's clamped SwiGLU with its alpha and limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ExpertActivation {
    Swiglu,
    Clamped { alpha: f32, limit: f32 },
}

/// gate/up with the activation over every routed row: act[row] = act(W_gate[e] x[token] +
/// b_gate[e], W_up[e] x[token] + b_up[e]), e the row's expert.
#[derive(Debug, Clone, Copy)]
pub struct MoeGateUpArgs {
    /// Stacks [experts, width, k].
    pub gate: ExpertMatrix,
    pub up: ExpertMatrix,
    pub width: usize,
    /// bf16 [tokens, k]: the normalised activations.
    pub x: DevicePtr,
    /// bf16 [routed rows, width].
    pub act: DevicePtr,
    pub k: usize,
    /// f32 [experts, width] each: gate's and up's biases (gpt-oss).
    pub biases: Option<(DevicePtr, DevicePtr)>,
    pub activation: ExpertActivation,
}

/// down over every routed row: y[row] = W_down[e] act[row] + b_down[e].
#[derive(Debug, Clone, Copy)]
pub struct MoeDownArgs {
    /// Stack [experts, rows, k].
    pub down: ExpertMatrix,
    pub rows: usize,
    /// bf16 [routed rows, k].
    pub act: DevicePtr,
    /// f32 [routed rows, rows].
    pub y: DevicePtr,
    pub k: usize,
    /// f32 [experts, rows] (gpt-oss).
    pub bias: Option<DevicePtr>,
}

/// The split along k of a product with `tiles` tiles of 16 weight rows: from the shape alone
/// (not from how many rows an expert got), so each row's sum order is fixed.
fn product_split(tiles: usize, k: usize) -> usize {
    split_index(tiles, k.div_ceil(128), 4)
}

/// The kernel variant (by `chunk`), the split along k and the launch shape of an expert
/// product whose skinny tiles hold `tile` of its `outputs` (a block runs 8 warps, `split` to a
/// tile) and whose 128-row tiles (moe_tile.cu) hold `tile_outputs`, over every work item the
/// routing can make. The split comes from the skinny shape for both kernels: one sum order.
#[allow(clippy::too_many_arguments)]
fn expert_grid(
    format: ExpertFormat,
    outputs: usize,
    tile: usize,
    tile_outputs: usize,
    k: usize,
    routed: usize,
    experts: usize,
    chunk: usize,
) -> anyhow::Result<(usize, usize, Shape)> {
    let variant = chunk_index(chunk)?;
    anyhow::ensure!(
        k.is_multiple_of(format.k_multiple()),
        "{format:?} expert products need k % {} == 0, k is {k}",
        format.k_multiple()
    );
    let split = product_split(outputs.div_ceil(tile), k);
    let outputs_per_block = if chunk == TILE_CHUNK {
        tile_outputs
    } else {
        tile * 8 / QGEMV_SPLITS[split]
    };
    let shape = Shape {
        grid: (
            outputs.div_ceil(outputs_per_block) as u32,
            moe_max_items(routed, experts, chunk) as u32,
            1,
        ),
        block: 256,
    };
    Ok((variant, split, shape))
}

impl Kernels {
    /// Routes `n` tokens from their router logits (f32 [n, experts], plus `bias` f32
    /// [experts] when given) to `k` experts each and groups the `n k` choices by expert into
    /// work items of at most `chunk` rows (two kernels: a warp a token, then one block that
    /// groups); `load` (u64 [experts]) gets each expert's routed rows added when given.
    #[allow(clippy::too_many_arguments)]
    pub fn moe_route_group(
        &self,
        logits: DevicePtr,
        experts: usize,
        k: usize,
        normalize: bool,
        n: usize,
        r: &MoeRouting,
        chunk: usize,
        load: Option<ExpertCounters>,
        bias: Option<DevicePtr>,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(experts <= MOE_MAX_EXPERTS && (1..=MOE_MAX_K.min(experts)).contains(&k));
        chunk_index(chunk)?;
        let route = MoeRoute {
            logits,
            experts,
            k,
            normalize: i32::from(normalize),
            n,
            ids: r.ids,
            weights: r.weights,
            bias,
        };
        self.launch(grid1(n.div_ceil(8), 256), &route)?;
        let group = MoeGroup {
            ids: r.ids,
            experts,
            k,
            n,
            row_of_choice: r.row_of_choice,
            token_of_row: r.token_of_row,
            items: r.items,
            chunk,
            max_items: moe_max_items(n * k, experts, chunk),
            slots: load.map(|l| l.slots),
            load: load.map(|l| l.counts),
        };
        self.launch(grid1(1, 1024), &group)
    }

    /// gate/up + activation for the `routed` rows of routing `r` (grouped in items of
    /// `chunk`), every expert in one launch.
    pub fn moe_gate_up(
        &self,
        a: &MoeGateUpArgs,
        r: &MoeRouting,
        routed: usize,
        experts: usize,
        chunk: usize,
    ) -> anyhow::Result<()> {
        // A tile is 8 intermediate columns: their 8 gate rows and 8 up rows.
        let format = a.gate.format;
        anyhow::ensure!(
            a.up.format == format,
            "gate and up stacks in different formats"
        );
        // A 128-row tile is 64 columns' gate and up rows.
        let (variant, split, shape) = expert_grid(
            format,
            a.width,
            8,
            TILE_MMA_ROWS / 2,
            a.k,
            routed,
            experts,
            chunk,
        )?;
        let (alpha, limit, clamped) = match a.activation {
            ExpertActivation::Swiglu => (0.0, 0.0, 0),
            ExpertActivation::Clamped { alpha, limit } => (alpha, limit, 1),
        };
        if chunk == TILE_CHUNK {
            let params = MoeTileGateUp {
                kernel: moe_tile_gate_up_name(format.index()?),
                gate: a.gate.values,
                gate_e: a.gate.second_plane,
                up: a.up.values,
                up_e: a.up.second_plane,
                width: a.width,
                x: a.x,
                token_of_row: r.token_of_row,
                items: r.items,
                act: a.act,
                k: a.k,
                gate_bias: a.biases.map(|b| b.0),
                up_bias: a.biases.map(|b| b.1),
                clamped,
                alpha,
                limit,
                split: QGEMV_SPLITS[split],
            };
            return self.launch_with_shared(shape, TILE_MMA_SHARED_BYTES, &params);
        }
        let params = MoeGateUp {
            kernel: moe_gate_up_name(format.index()?, variant, split),
            gate: a.gate.values,
            gate_e: a.gate.second_plane,
            up: a.up.values,
            up_e: a.up.second_plane,
            width: a.width,
            x: a.x,
            token_of_row: r.token_of_row,
            items: r.items,
            act: a.act,
            k: a.k,
            gate_bias: a.biases.map(|b| b.0),
            up_bias: a.biases.map(|b| b.1),
            clamped,
            alpha,
            limit,
        };
        self.launch(shape, &params)
    }

    /// down for the `routed` rows of routing `r` (grouped in items of `chunk`), every expert
    /// in one launch.
    pub fn moe_down(
        &self,
        a: &MoeDownArgs,
        r: &MoeRouting,
        routed: usize,
        experts: usize,
        chunk: usize,
    ) -> anyhow::Result<()> {
        // A tile is 16 output rows.
        let format = a.down.format;
        let (variant, split, shape) = expert_grid(
            format,
            a.rows,
            16,
            TILE_MMA_ROWS,
            a.k,
            routed,
            experts,
            chunk,
        )?;
        if chunk == TILE_CHUNK {
            let params = MoeTileDown {
                kernel: moe_tile_down_name(format.index()?),
                down: a.down.values,
                down_e: a.down.second_plane,
                rows: a.rows,
                act: a.act,
                items: r.items,
                y: a.y,
                k: a.k,
                bias: a.bias,
                split: QGEMV_SPLITS[split],
            };
            return self.launch_with_shared(shape, TILE_MMA_SHARED_BYTES, &params);
        }
        let params = MoeDown {
            kernel: moe_down_name(format.index()?, variant, split),
            down: a.down.values,
            down_e: a.down.second_plane,
            rows: a.rows,
            act: a.act,
            items: r.items,
            y: a.y,
            k: a.k,
            bias: a.bias,
        };
        self.launch(shape, &params)
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
        let params = MoeCombine {
            ys,
            row_of_choice: r.row_of_choice,
            weights: r.weights,
            k,
            hidden,
            shared_out: shared.map(|s| s.0),
            shared_score: shared.map(|s| s.1),
            out,
        };
        self.launch(shape, &params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_items_cover_every_grouping() {
        // Every way of spreading the choices over the experts needs at most the bound: the
        // worst is as many experts as possible with a partial item each.
        let experts = 128usize;
        for &chunk in &MOE_CHUNKS {
            for choices in [1usize, 7, 8, 9, 64, 129, 1000, 2048, 4096 + 3] {
                let bound = moe_max_items(choices, experts, chunk);
                for used in [1, 2, 3, 17, 64, 127, 128] {
                    let used = used.min(choices);
                    let items: usize = (0..used)
                        .map(|e| (choices / used + usize::from(e < choices % used)).div_ceil(chunk))
                        .sum();
                    assert!(items <= bound, "{choices} over {used}: {items} > {bound}");
                }
            }
        }
    }

    #[test]
    fn large_steps_take_the_wide_items() {
        assert_eq!(moe_chunk(8, 128), 8);
        assert_eq!(moe_chunk(64 * 8, 128), 8);
        assert_eq!(moe_chunk(512 * 8, 128), 32);
        assert_eq!(moe_chunk(4096 * 8, 128), 128);
        assert!(chunk_index(16).is_err());
    }
}
