//! Launchers of kernels/quant_gemv.cu, quant_gemv_mma.cu, fp8_gemv_mma.cu and quant_dequant.cu:
//! products, dequantization and embedding lookups on quantized matrices kept in their own bits
//! (crate::quant).

use super::embedding::Lookup;
use super::gemv::{bf16_order_split_index, SKINNY_MAX_TOKENS};
use super::launch::{grid1, Kernels};
use super::names::{
    ordered_qgemv_name, ordered_wide_qgemv_name, qdequant_name, qembed_name, qgemv_name,
    FP8_MMA_NAMES, GEMV_MAX_TOKENS, QGEMV_SPLITS, QMMA_NAMES,
};
use super::signatures::{
    Fp8GemvMma, Qdequant, Qembed, Qgemv, QgemvMmaQ4K, QgemvMmaQ6K, QgemvOrdered, QgemvOrderedWide,
};
use crate::device_ptr::DevicePtr;
use crate::quant::QuantType;

/// y[t, r] (f32, row stride `ldy`) = x[t, :] (bf16 [n, k]) · W[r, :] for `n` <= 8 tokens and
/// the `rows` rows of a quantized matrix.
#[derive(Debug, Clone, Copy)]
pub struct QuantGemvArgs {
    pub format: QuantType,
    pub planes: [Option<DevicePtr>; 3],
    pub x: DevicePtr,
    pub y: DevicePtr,
    pub n: usize,
    pub rows: usize,
    pub k: usize,
    pub ldy: usize,
}

/// Rows one warp of the quantized GEMV takes for `n` tokens (`RowsPerWarp` in
/// quant_gemv.cu): each x value loaded serves that many rows, while registers allow two blocks
/// per SM.
fn qgemv_rows_per_warp(n: usize) -> usize {
    match n {
        1..=4 => 2,
        _ => 1,
    }
}

/// Which of `QGEMV_SPLITS` (warps sharing a row group along k) fills the GPU for `groups` row
/// groups of 8 / split per thread block: the smallest that gives two thread blocks per SM of
/// a large GPU, as long as every warp keeps at least `min_work` of the `work` pieces of k.
pub(super) fn split_index(groups: usize, work: usize, min_work: usize) -> usize {
    const ENOUGH_BLOCKS: usize = 264;
    let mut index = 0;
    while index + 1 < QGEMV_SPLITS.len() {
        let blocks = groups.div_ceil(8 / QGEMV_SPLITS[index]);
        if blocks >= ENOUGH_BLOCKS || work / QGEMV_SPLITS[index + 1] < min_work {
            break;
        }
        index += 1;
    }
    index
}

/// The CUDA-core GEMV's split: every warp keeps at least 16 units (a lane decodes one unit at
/// a time, so fewer leave lanes idle).
fn qgemv_split_index(rows: usize, units: usize, n: usize) -> usize {
    split_index(rows.div_ceil(qgemv_rows_per_warp(n)), units, 16)
}

/// Largest k of the tensor-core GEMVs (quant_gemv_mma.cu stages x in static shared memory,
/// QMMA_MAX_BLOCKS = 88 blocks of 256). Beyond it the CUDA-core GEMV runs, at ~1.3-1.6 TB/s
/// where these reach ~2.5 (2026-12-07, the 27B shape's down products, k = 17,408).
const QMMA_MAX_K: usize = 88 * 256;

/// The tensor-core GEMV's split over its 16-row tiles: every warp keeps at least two
/// 256-element blocks of k.
fn qmma_split_index(rows: usize, k: usize) -> usize {
    split_index(rows.div_ceil(16), k / 256, 2)
}

/// The FP8 tensor-core GEMV's split over its 32-row tiles: every warp keeps at least four
/// 128-weight blocks of k.
fn fp8_split_index(rows: usize, k: usize) -> usize {
    split_index(rows.div_ceil(32), k / 128, 4)
}

impl Kernels {
    pub fn qgemv(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "qgemv takes 1..=8 tokens, not {n}"
        );
        if n > a.format.cuda_core_gemv_tokens() {
            return self.fp8_gemv_mma(a);
        }
        let tensor_cores = matches!(a.format, QuantType::Q4K | QuantType::Q6K);
        if tensor_cores && n == 1 && k % 256 == 0 && k <= QMMA_MAX_K {
            return self.qgemv_mma(a);
        }
        let units = k / a.format.unit_len();
        let split_index = qgemv_split_index(rows, units, n);
        let rows_per_block = 8 / QGEMV_SPLITS[split_index] * qgemv_rows_per_warp(n);
        let [p0, p1, p2] = a.planes;
        let params = Qgemv {
            kernel: qgemv_name(a.format, n, split_index),
            p0,
            p1,
            p2,
            x: a.x,
            y: a.y,
            rows,
            k,
            ldy: a.ldy,
        };
        self.launch(grid1(rows.div_ceil(rows_per_block), 256), &params)
    }

    /// The batch-invariant product of `a.n` <= 64 tokens (quant_gemv_ordered.cu): the
    /// dequantizer's bf16 values summed in bf16_order.cuh's order, as the dequantized slab's
    /// product of more tokens is; k % 32 == 0. Each block of weights is decoded once for all
    /// the tokens (the wide kernels beyond 8).
    pub fn qgemv_ordered(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=SKINNY_MAX_TOKENS).contains(&a.n) && a.k.is_multiple_of(32),
            "the ordered quantized product takes 1..={SKINNY_MAX_TOKENS} tokens and k % 32 == \
             0, not n = {}, k = {}",
            a.n,
            a.k
        );
        let split_index = bf16_order_split_index(a.k);
        let rows_per_block = 16 * 8 / QGEMV_SPLITS[split_index];
        let grid = grid1(a.rows.div_ceil(rows_per_block), 256);
        let [p0, p1, p2] = a.planes;
        let (x, y, rows, k, ldy, n) = (a.x, a.y, a.rows, a.k, a.ldy, a.n);
        if n <= GEMV_MAX_TOKENS {
            let kernel = ordered_qgemv_name(a.format, split_index);
            let params = QgemvOrdered {
                kernel,
                p0,
                p1,
                p2,
                x,
                y,
                rows,
                k,
                ldy,
                n,
            };
            return self.launch(grid, &params);
        }
        let kernel = ordered_wide_qgemv_name(a.format, split_index);
        let params = QgemvOrderedWide {
            kernel,
            p0,
            p1,
            p2,
            x,
            y,
            rows,
            k,
            ldy,
            n,
        };
        self.launch(grid, &params)
    }

    /// One token's product on a Q4_K or Q6_K matrix through the tensor cores
    /// (quant_gemv_mma.cu).
    fn qgemv_mma(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        let split_index = qmma_split_index(a.rows, a.k);
        let rows_per_block = 16 * 8 / QGEMV_SPLITS[split_index];
        let plane = |i: usize| {
            a.planes[i].ok_or_else(|| anyhow::anyhow!("{:?} matrix without plane {i}", a.format))
        };
        let grid = grid1(a.rows.div_ceil(rows_per_block), 256);
        if a.format == QuantType::Q4K {
            let params = QgemvMmaQ4K {
                kernel: QMMA_NAMES[0][split_index],
                w: plane(0)?,
                x: a.x,
                y: a.y,
                rows: a.rows,
                k: a.k,
                ldy: a.ldy,
            };
            self.launch(grid, &params)
        } else {
            // Q6_K: quants and scales in p0, d in p1.
            let params = QgemvMmaQ6K {
                kernel: QMMA_NAMES[1][split_index],
                p0: plane(0)?,
                p1: plane(1)?,
                x: a.x,
                y: a.y,
                rows: a.rows,
                k: a.k,
            };
            self.launch(grid, &params)
        }
    }

    /// 2..8 tokens' product on an FP8 matrix through the tensor cores (fp8_gemv_mma.cu).
    fn fp8_gemv_mma(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        let split_index = fp8_split_index(a.rows, a.k);
        let rows_per_block = 32 * 8 / QGEMV_SPLITS[split_index];
        let plane =
            |i: usize| a.planes[i].ok_or_else(|| anyhow::anyhow!("FP8 matrix without plane {i}"));
        let params = Fp8GemvMma {
            kernel: FP8_MMA_NAMES[split_index],
            scales: plane(0)?,
            q: plane(1)?,
            x: a.x,
            y: a.y,
            rows: a.rows,
            k: a.k,
            ldy: a.ldy,
            n: a.n,
        };
        self.launch(grid1(a.rows.div_ceil(rows_per_block), 256), &params)
    }

    /// Rows `row0 .. row0 + rows` of a quantized [_, k] matrix into bf16 `out` [rows, k].
    pub fn qdequant(
        &self,
        format: QuantType,
        planes: [Option<DevicePtr>; 3],
        out: DevicePtr,
        row0: usize,
        rows: usize,
        k: usize,
    ) -> anyhow::Result<()> {
        // A thread per 8 elements (quant_dequant.cu), grid-stride beyond 65,535 blocks.
        let blocks = (rows * k / 8).div_ceil(256).clamp(1, 65_535);
        let [p0, p1, p2] = planes;
        let params = Qdequant {
            kernel: qdequant_name(format),
            p0,
            p1,
            p2,
            out,
            row0,
            rows,
            k,
        };
        self.launch(grid1(blocks, 256), &params)
    }

    /// The lookup `l` on a quantized embedding table.
    pub fn qembed(
        &self,
        format: QuantType,
        planes: [Option<DevicePtr>; 3],
        l: &Lookup,
    ) -> anyhow::Result<()> {
        let [p0, p1, p2] = planes;
        let params = Qembed {
            kernel: qembed_name(format),
            p0,
            p1,
            p2,
            tokens: l.tokens,
            x: l.x,
            hidden: l.hidden,
            scale: l.scale,
        };
        self.launch(grid1(l.n, 128), &params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_fills_the_gpu_without_idling_lanes() {
        // Llama-3.1-8B Q4_K (64 elements a unit): gate/up has rows to spare,
        assert_eq!(qgemv_split_index(28_672, 4096 / 64, 1), 0);
        // down (k 14,336) splits until two blocks per SM,
        assert_eq!(QGEMV_SPLITS[qgemv_split_index(4096, 14_336 / 64, 1)], 2);
        // the K projection (1,024 rows) splits until a warp would have under 16 units.
        assert_eq!(QGEMV_SPLITS[qgemv_split_index(1024, 4096 / 64, 1)], 4);
        // One warp per row for 8 tokens: more row groups, less need to split.
        assert_eq!(QGEMV_SPLITS[qgemv_split_index(4096, 4096 / 64, 8)], 1);
    }

    #[test]
    fn tensor_core_split_fills_the_gpu() {
        // 8B gate/up (1,792 tiles of 16 rows): two warps a tile give 448 thread blocks;
        assert_eq!(QGEMV_SPLITS[qmma_split_index(28_672, 4096)], 2);
        // down (256 tiles, 56 blocks of k) and O (16 blocks of k) split eight ways;
        assert_eq!(QGEMV_SPLITS[qmma_split_index(4096, 14_336)], 8);
        assert_eq!(QGEMV_SPLITS[qmma_split_index(4096, 4096)], 8);
        // a short k keeps two blocks per warp.
        assert_eq!(QGEMV_SPLITS[qmma_split_index(4096, 1024)], 2);
    }

    #[test]
    fn fp8_split_fills_the_gpu_with_four_blocks_a_warp() {
        // 8B gate/up: 896 tiles of 32 rows, four warps a tile give 448 thread blocks;
        assert_eq!(QGEMV_SPLITS[fp8_split_index(28_672, 4096)], 4);
        // down and O (128 tiles) split eight ways, O's warps keeping exactly four blocks;
        assert_eq!(QGEMV_SPLITS[fp8_split_index(4096, 14_336)], 8);
        assert_eq!(QGEMV_SPLITS[fp8_split_index(4096, 4096)], 8);
        // four blocks of k in all: no split.
        assert_eq!(QGEMV_SPLITS[fp8_split_index(4096, 512)], 1);
    }
}
