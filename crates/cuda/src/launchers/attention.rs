//! Launchers of kernels/attention_decode.cu (split-K flash-decoding, one query row per
//! sequence, and the reduce of the splits) and kernels/attention_prefill.cu (flash attention
//! of prefill chunks over their paged prefix).

use super::launch::{Kernels, Shape};
use super::names::{decode_shared_bytes, prefill_tile, DECODE_NAMES, PREFILL_NAMES};
use super::signatures::{AttentionDecode, AttentionDecodeReduce, AttentionPrefill};
use crate::device_ptr::DevicePtr;

/// Head sizes the attention kernels are instantiated for.
pub const HEAD_DIMS: [usize; 5] = [16, 32, 64, 128, 256];
/// Largest query group (query heads per KV head) of the decode kernel.
pub const MAX_GROUP: usize = 8;
/// Largest number of context splits of decode attention.
pub const MAX_SPLITS: usize = 32;

/// Context splits of decode attention for `num_decodes` sequences. Batch-invariant: always
/// `MAX_SPLITS`, of which each sequence uses one per tile of its own context (up to all of
/// them), so its sums do not depend on the batch. Otherwise the count that finishes soonest
/// in whole waves of `slots` resident blocks (`Kernels::decode_slots`): s splits run
/// ceil(blocks * s / slots) waves of 1/s of a context each, and each split adds 10% for its
/// partial sums, their reduction and its own start; never more splits than 64-key pieces of
/// the longest context (when known). For each batch it was measured on, the rule picks the
/// count that ran fastest; a smaller charge a split took more splits than paid off
/// (docs/performance.md, '2026-12-05 17:10-17:25 UTC, H100 80GB HBM3: decode attention at 256
/// streams').
pub fn decode_splits(
    num_decodes: usize,
    kv_heads: usize,
    slots: usize,
    max_ctx: Option<usize>,
    batch_invariant: bool,
) -> usize {
    if batch_invariant {
        return MAX_SPLITS;
    }
    let blocks = (num_decodes * kv_heads).max(1);
    let slots = slots.max(1);
    let most = max_ctx.map_or(MAX_SPLITS, |ctx| ctx.div_ceil(64).clamp(1, MAX_SPLITS));
    let cost = |s: usize| {
        let waves = (blocks * s).div_ceil(slots) as f64;
        waves / s as f64 * (1.0 + 0.1 * (s - 1) as f64)
    };
    (1..=most)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
        .unwrap_or(1)
}

/// Head geometry of the attention kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl AttentionDims {
    pub fn group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }
}

/// The attention pattern of one layer as the kernels take it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionMask {
    /// Scores are multiplied by this (`AttentionSpec::scale`: 1/sqrt(head_dim), or
    /// gemma3's query_pre_attn_scalar^-0.5).
    pub scale: f32,
    /// Query at position i sees keys j with i - w < j <= i; 0: every earlier key.
    pub window: usize,
    /// gpt-oss's sinks: f32 [num_heads], a logit per head that joins each row's softmax
    /// denominator.
    pub sinks: Option<DevicePtr>,
}

impl AttentionMask {
    /// Full causal attention with the usual 1/sqrt(head_dim) scale.
    pub fn causal(head_dim: usize) -> Self {
        AttentionMask {
            scale: 1.0 / (head_dim as f32).sqrt(),
            window: 0,
            sinks: None,
        }
    }
    /// The scale in log2 units (the kernels use exp2). For 1/sqrt(head_dim) this equals
    /// LOG2_E / sqrt(head_dim) bit for bit at head sizes 16..256.
    fn scale_log2(&self) -> f32 {
        std::f32::consts::LOG2_E * self.scale
    }
}

/// Arguments of [`Kernels::attention_decode`] (device addresses unless noted).
#[derive(Debug, Clone, Copy)]
pub struct DecodeArgs {
    pub dims: AttentionDims,
    pub mask: AttentionMask,
    pub q: DevicePtr,
    pub k_cache: DevicePtr,
    pub v_cache: DevicePtr,
    pub pages: DevicePtr,
    pub page_offsets: DevicePtr,
    pub ctx_lens: DevicePtr,
    pub q_rows: DevicePtr,
    pub out: DevicePtr,
    pub part_acc: DevicePtr,
    pub part_ml: DevicePtr,
    /// i32 [num_seqs]: the splits each sequence used (written by the decode kernel, read by
    /// the reduction of the partials).
    pub seq_splits: DevicePtr,
    pub page_size: usize,
    pub num_seqs: usize,
    pub num_splits: usize,
}

/// Arguments of [`Kernels::attention_prefill`].
#[derive(Debug, Clone, Copy)]
pub struct PrefillArgs {
    pub dims: AttentionDims,
    pub mask: AttentionMask,
    pub q: DevicePtr,
    pub k_cache: DevicePtr,
    pub v_cache: DevicePtr,
    pub pages: DevicePtr,
    pub page_offsets: DevicePtr,
    pub q_starts: DevicePtr,
    pub q_lens: DevicePtr,
    pub pos0s: DevicePtr,
    pub out: DevicePtr,
    pub page_size: usize,
    pub num_seqs: usize,
    pub max_q_len: usize,
}

/// The kernel of `kernels` (name, head_dim) instantiated for `head_dim`.
fn for_head_dim(
    kernels: &[(&'static str, usize)],
    head_dim: usize,
    what: &str,
) -> anyhow::Result<&'static str> {
    kernels
        .iter()
        .find(|&&(_, hd)| hd == head_dim)
        .map(|&(name, _)| name)
        .ok_or_else(|| anyhow::anyhow!("no {what} attention kernel for head_dim {head_dim}"))
}

impl Kernels {
    /// Decode attention blocks resident on the whole GPU at once (`sm_count` multiprocessors):
    /// the wave size [`decode_splits`] plans with.
    pub fn decode_slots(&self, head_dim: usize, sm_count: usize) -> anyhow::Result<usize> {
        let name = for_head_dim(&DECODE_NAMES, head_dim, "decode")?;
        let per_sm = self.occupancy(name, 128, decode_shared_bytes(head_dim))?;
        Ok(per_sm.max(1) * sm_count)
    }

    pub fn attention_decode(&self, a: &DecodeArgs) -> anyhow::Result<()> {
        let d = a.dims;
        let params = AttentionDecode {
            kernel: for_head_dim(&DECODE_NAMES, d.head_dim, "decode")?,
            q: a.q,
            k_cache: a.k_cache,
            v_cache: a.v_cache,
            pages: a.pages,
            page_offsets: a.page_offsets,
            ctx_lens: a.ctx_lens,
            q_rows: a.q_rows,
            out: a.out,
            part_acc: a.part_acc,
            part_ml: a.part_ml,
            seq_splits_out: a.seq_splits,
            num_kv_heads: d.num_kv_heads,
            group: d.group(),
            page_size: a.page_size,
            scale_log2: a.mask.scale_log2(),
            window: a.mask.window,
            sinks: a.mask.sinks,
        };
        let shape = Shape {
            grid: (
                d.num_kv_heads as u32,
                a.num_seqs as u32,
                a.num_splits as u32,
            ),
            block: 128,
        };
        self.launch_with_shared(shape, decode_shared_bytes(d.head_dim), &params)?;
        if a.num_splits > 1 {
            let params = AttentionDecodeReduce {
                part_acc: a.part_acc,
                part_ml: a.part_ml,
                seq_splits: a.seq_splits,
                q_rows: a.q_rows,
                out: a.out,
                num_splits: a.num_splits,
                head_dim: d.head_dim,
                sinks: a.mask.sinks,
            };
            let shape = Shape {
                grid: (d.num_heads as u32, a.num_seqs as u32, 1),
                block: d.head_dim as u32,
            };
            self.launch(shape, &params)?;
        }
        Ok(())
    }

    /// Prefill attention of `num_seqs` chunks; `max_q_len` bounds the row tiles.
    pub fn attention_prefill(&self, a: &PrefillArgs) -> anyhow::Result<()> {
        let d = a.dims;
        let params = AttentionPrefill {
            kernel: for_head_dim(&PREFILL_NAMES, d.head_dim, "prefill")?,
            q: a.q,
            k_cache: a.k_cache,
            v_cache: a.v_cache,
            pages: a.pages,
            page_offsets: a.page_offsets,
            q_starts: a.q_starts,
            q_lens: a.q_lens,
            pos0s: a.pos0s,
            out: a.out,
            num_kv_heads: d.num_kv_heads,
            group: d.group(),
            page_size: a.page_size,
            scale_log2: a.mask.scale_log2(),
            window: a.mask.window,
            sinks: a.mask.sinks,
        };
        let (tile_rows, shared_bytes) = prefill_tile(d.head_dim);
        let tiles = (a.max_q_len * d.group()).div_ceil(tile_rows);
        anyhow::ensure!(
            tiles <= 65_535,
            "a prefill chunk of {} tokens is too long",
            a.max_q_len
        );
        // KV heads fastest and row tiles in y (the kernel takes them last first).
        let shape = Shape {
            grid: (d.num_kv_heads as u32, tiles as u32, a.num_seqs as u32),
            block: 128,
        };
        self.launch_with_shared(shape, shared_bytes, &params)
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_splits, MAX_SPLITS};

    #[test]
    fn splits_fill_whole_waves() {
        // 396 resident blocks (132 multiprocessors, 3 each).
        assert_eq!(decode_splits(256, 2, 396, None, false), 3); // 1,536 blocks: 3.9 waves
        assert_eq!(decode_splits(256, 8, 396, None, false), 1); // 2,048 blocks: 5.2 waves
        assert_eq!(decode_splits(32, 8, 396, None, false), 3); // 768 blocks: 1.9 waves
        assert_eq!(decode_splits(64, 2, 396, None, false), 3); // 384 blocks: one wave
        assert_eq!(decode_splits(1, 2, 396, None, false), MAX_SPLITS);
        assert_eq!(decode_splits(1, 2, 396, Some(100), false), 2); // two 64-key pieces
        assert_eq!(decode_splits(256, 8, 396, None, true), MAX_SPLITS);
        // Many waves: a split's charge outweighs the last wave's idle blocks.
        assert_eq!(decode_splits(4096, 8, 396, None, false), 1);
    }
}
