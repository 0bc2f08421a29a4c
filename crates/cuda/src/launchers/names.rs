//! The instantiations of the kernel families (the kernels a `.cu` macro instantiates, declared
//! once each in the signature table, super::signatures): the lists the launchers pick a kernel
//! from and the load-time check walks, and the launch geometry some of them share.

use std::sync::LazyLock;

use super::expert_format::ExpertFormat;
use crate::quant::QuantType;

/// The mixture-of-experts products (moe_experts.cu) by weight format (`ExpertFormat::ALL`),
/// item size (`moe::MOE_CHUNKS` but the tiles' 128) and split (`QGEMV_SPLITS`): gate/up's names
/// then down's, each table format-major.
static MOE_NAMES: LazyLock<[Vec<String>; 2]> = LazyLock::new(|| {
    ["moe_gate_up", "moe_down"].map(|kind| {
        let mut names = Vec::new();
        for format in ExpertFormat::ALL {
            for rows in [8, 32] {
                for split in QGEMV_SPLITS {
                    let f = format.kernel_suffix();
                    names.push(format!("{kind}_{f}_s{split}_r{rows}"));
                }
            }
        }
        names
    })
});

fn moe_name(kind: usize, format: usize, variant: usize, split: usize) -> &'static str {
    &MOE_NAMES[kind][(format * 2 + variant) * QGEMV_SPLITS.len() + split]
}

/// gate/up's skinny product for format `format` (its index in `ExpertFormat::ALL`), item-size
/// variant `variant` (8 or 32 rows) and split index `split`.
pub(super) fn moe_gate_up_name(format: usize, variant: usize, split: usize) -> &'static str {
    moe_name(0, format, variant, split)
}

/// down's, as `moe_gate_up_name`.
pub(super) fn moe_down_name(format: usize, variant: usize, split: usize) -> &'static str {
    moe_name(1, format, variant, split)
}

pub(super) fn moe_gate_up_names() -> Vec<&'static str> {
    MOE_NAMES[0].iter().map(String::as_str).collect()
}

pub(super) fn moe_down_names() -> Vec<&'static str> {
    MOE_NAMES[1].iter().map(String::as_str).collect()
}

/// Largest token count the GEMV kernels take.
pub const GEMV_MAX_TOKENS: usize = 8;

/// The GEMV kernels by split (1, 4, 8 warps per row) and token count.
pub(super) const GEMV_NAMES: [[&str; GEMV_MAX_TOKENS]; 3] = [
    [
        "gemv_bf16_1_s1",
        "gemv_bf16_2_s1",
        "gemv_bf16_3_s1",
        "gemv_bf16_4_s1",
        "gemv_bf16_5_s1",
        "gemv_bf16_6_s1",
        "gemv_bf16_7_s1",
        "gemv_bf16_8_s1",
    ],
    [
        "gemv_bf16_1_s4",
        "gemv_bf16_2_s4",
        "gemv_bf16_3_s4",
        "gemv_bf16_4_s4",
        "gemv_bf16_5_s4",
        "gemv_bf16_6_s4",
        "gemv_bf16_7_s4",
        "gemv_bf16_8_s4",
    ],
    [
        "gemv_bf16_1_s8",
        "gemv_bf16_2_s8",
        "gemv_bf16_3_s8",
        "gemv_bf16_4_s8",
        "gemv_bf16_5_s8",
        "gemv_bf16_6_s8",
        "gemv_bf16_7_s8",
        "gemv_bf16_8_s8",
    ],
];

pub(super) fn gemv_names() -> Vec<&'static str> {
    GEMV_NAMES.as_flattened().to_vec()
}

/// Token groups of 8 the skinny tensor-core products are built for (gemv_mma.cu).
pub const GEMV_MMA_GROUPS: [usize; 4] = [1, 2, 4, 8];

/// The skinny tensor-core products on bf16 weights (gemv_mma.cu, up to 8 groups of 8 tokens)
/// by token groups (`GEMV_MMA_GROUPS`) and split (`QGEMV_SPLITS`).
pub(super) const GEMV_MMA_NAMES: [[&str; 4]; 4] = [
    [
        "gemv_mma_bf16_t1_s1",
        "gemv_mma_bf16_t1_s2",
        "gemv_mma_bf16_t1_s4",
        "gemv_mma_bf16_t1_s8",
    ],
    [
        "gemv_mma_bf16_t2_s1",
        "gemv_mma_bf16_t2_s2",
        "gemv_mma_bf16_t2_s4",
        "gemv_mma_bf16_t2_s8",
    ],
    [
        "gemv_mma_bf16_t4_s1",
        "gemv_mma_bf16_t4_s2",
        "gemv_mma_bf16_t4_s4",
        "gemv_mma_bf16_t4_s8",
    ],
    [
        "gemv_mma_bf16_t8_s1",
        "gemv_mma_bf16_t8_s2",
        "gemv_mma_bf16_t8_s4",
        "gemv_mma_bf16_t8_s8",
    ],
];

pub(super) fn gemv_mma_names() -> Vec<&'static str> {
    GEMV_MMA_NAMES.as_flattened().to_vec()
}

/// The experts' tiled products for large steps (moe_tile.cu) by weight format
/// (`ExpertFormat::ALL`): gate/up's, then down's. Their split is a parameter.
static MOE_TILE_NAMES: LazyLock<[Vec<String>; 2]> = LazyLock::new(|| {
    ["moe_tile_gate_up", "moe_tile_down"].map(|kind| {
        ExpertFormat::ALL
            .iter()
            .map(|f| format!("{kind}_{}", f.kernel_suffix()))
            .collect()
    })
});

pub(super) fn moe_tile_gate_up_name(format: usize) -> &'static str {
    &MOE_TILE_NAMES[0][format]
}

pub(super) fn moe_tile_down_name(format: usize) -> &'static str {
    &MOE_TILE_NAMES[1][format]
}

pub(super) fn moe_tile_gate_up_names() -> Vec<&'static str> {
    MOE_TILE_NAMES[0].iter().map(String::as_str).collect()
}

pub(super) fn moe_tile_down_names() -> Vec<&'static str> {
    MOE_TILE_NAMES[1].iter().map(String::as_str).collect()
}

/// The dynamic shared memory of the batch-invariant bf16 product for many tokens
/// (tile_mma.cu): three stages of (128 weight rows + 128 tokens) x 128 bf16.
pub(super) const TILE_MMA_SHARED_BYTES: u32 = 3 * 256 * 256;
/// Weight rows and tokens of one tile_mma.cu thread block.
pub(super) const TILE_MMA_ROWS: usize = 128;
pub(super) const TILE_MMA_TOKENS: usize = 128;

/// GEMV splits the quantized kernels are built for (warps sharing a row group along k).
pub(super) const QGEMV_SPLITS: [usize; 4] = [1, 2, 4, 8];

/// The one-token tensor-core GEMVs (quant_gemv_mma.cu) by split, Q4_K then Q6_K.
pub(super) const QMMA_NAMES: [[&str; 4]; 2] = [
    [
        "qgemv_mma_q4_k_1_s1",
        "qgemv_mma_q4_k_1_s2",
        "qgemv_mma_q4_k_1_s4",
        "qgemv_mma_q4_k_1_s8",
    ],
    [
        "qgemv_mma_q6_k_1_s1",
        "qgemv_mma_q6_k_1_s2",
        "qgemv_mma_q6_k_1_s4",
        "qgemv_mma_q6_k_1_s8",
    ],
];

pub(super) fn qmma_q4_k_names() -> Vec<&'static str> {
    QMMA_NAMES[0].to_vec()
}

pub(super) fn qmma_q6_k_names() -> Vec<&'static str> {
    QMMA_NAMES[1].to_vec()
}

/// The FP8 tensor-core GEMVs (fp8_gemv_mma.cu, 2..8 tokens) by split.
pub(super) const FP8_MMA_NAMES: [&str; 4] = [
    "fp8_gemv_mma_s1",
    "fp8_gemv_mma_s2",
    "fp8_gemv_mma_s4",
    "fp8_gemv_mma_s8",
];

pub(super) fn fp8_mma_names() -> Vec<&'static str> {
    FP8_MMA_NAMES.to_vec()
}

/// Every quantized kernel's name: per type, the CUDA-core GEMVs by token count (up to
/// `QuantType::cuda_core_gemv_tokens`) and split, then the dequantizer and the embedding
/// lookup; and where each type's names start.
static QUANT_NAMES: LazyLock<(Vec<String>, Vec<usize>)> = LazyLock::new(|| {
    let mut names = Vec::new();
    let mut starts = Vec::new();
    for q in QuantType::ALL {
        starts.push(names.len());
        let s = q.kernel_suffix();
        for n in 1..=q.cuda_core_gemv_tokens() {
            for split in QGEMV_SPLITS {
                names.push(format!("qgemv_{s}_{n}_s{split}"));
            }
        }
        names.push(format!("qdequant_{s}"));
        names.push(format!("qembed_{s}"));
    }
    (names, starts)
});

/// Where `q`'s names start, and how many it has.
fn type_names(q: QuantType) -> (usize, usize) {
    let index = QuantType::ALL.iter().position(|&t| t == q).unwrap_or(0);
    (
        QUANT_NAMES.1[index],
        q.cuda_core_gemv_tokens() * QGEMV_SPLITS.len() + 2,
    )
}

pub(super) fn qgemv_names() -> Vec<&'static str> {
    QuantType::ALL
        .into_iter()
        .flat_map(|q| {
            (1..=q.cuda_core_gemv_tokens()).flat_map(move |n| {
                (0..QGEMV_SPLITS.len()).map(move |split_index| qgemv_name(q, n, split_index))
            })
        })
        .collect()
}

pub(super) fn qdequant_names() -> Vec<&'static str> {
    QuantType::ALL.into_iter().map(qdequant_name).collect()
}

pub(super) fn qembed_names() -> Vec<&'static str> {
    QuantType::ALL.into_iter().map(qembed_name).collect()
}

/// The batch-invariant products on quantized matrices (quant_gemv_ordered.cu), per type by
/// split.
static ORDERED_QGEMV_NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
    QuantType::ALL
        .iter()
        .flat_map(|q| {
            QGEMV_SPLITS
                .iter()
                .map(move |split| format!("qgemv_ordered_{}_s{split}", q.kernel_suffix()))
        })
        .collect()
});

pub(super) fn ordered_qgemv_names() -> Vec<&'static str> {
    ORDERED_QGEMV_NAMES.iter().map(String::as_str).collect()
}

pub(super) fn ordered_qgemv_name(q: QuantType, split_index: usize) -> &'static str {
    let index = QuantType::ALL.iter().position(|&t| t == q).unwrap_or(0);
    &ORDERED_QGEMV_NAMES[index * QGEMV_SPLITS.len() + split_index]
}

/// quant_gemv_ordered.cu's kernels for 9..64 tokens, as [`ORDERED_QGEMV_NAMES`].
static ORDERED_WIDE_QGEMV_NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
    QuantType::ALL
        .iter()
        .flat_map(|q| {
            QGEMV_SPLITS
                .iter()
                .map(move |split| format!("qgemv_ordered_wide_{}_s{split}", q.kernel_suffix()))
        })
        .collect()
});

pub(super) fn ordered_wide_qgemv_names() -> Vec<&'static str> {
    ORDERED_WIDE_QGEMV_NAMES
        .iter()
        .map(String::as_str)
        .collect()
}

pub(super) fn ordered_wide_qgemv_name(q: QuantType, split_index: usize) -> &'static str {
    let index = QuantType::ALL.iter().position(|&t| t == q).unwrap_or(0);
    &ORDERED_WIDE_QGEMV_NAMES[index * QGEMV_SPLITS.len() + split_index]
}

/// The CUDA-core GEMV of `q` for `n` tokens (at most `q.cuda_core_gemv_tokens()`).
pub(super) fn qgemv_name(q: QuantType, n: usize, split_index: usize) -> &'static str {
    let (start, _) = type_names(q);
    &QUANT_NAMES.0[start + (n - 1) * QGEMV_SPLITS.len() + split_index]
}

pub(super) fn qdequant_name(q: QuantType) -> &'static str {
    let (start, count) = type_names(q);
    &QUANT_NAMES.0[start + count - 2]
}

pub(super) fn qembed_name(q: QuantType) -> &'static str {
    let (start, count) = type_names(q);
    &QUANT_NAMES.0[start + count - 1]
}

/// The prefill attention kernels and their head_dim.
pub(super) const PREFILL_NAMES: [(&str, usize); 5] = [
    ("attention_prefill_hd16", 16),
    ("attention_prefill_hd32", 32),
    ("attention_prefill_hd64", 64),
    ("attention_prefill_hd128", 128),
    ("attention_prefill_hd256", 256),
];

pub(super) fn prefill_names() -> Vec<&'static str> {
    PREFILL_NAMES.iter().map(|&(name, _)| name).collect()
}

/// The decode attention kernels by head_dim.
pub(super) const DECODE_NAMES: [(&str, usize); 5] = [
    ("attention_decode_hd16", 16),
    ("attention_decode_hd32", 32),
    ("attention_decode_hd64", 64),
    ("attention_decode_hd128", 128),
    ("attention_decode_hd256", 256),
];

pub(super) fn decode_names() -> Vec<&'static str> {
    DECODE_NAMES.iter().map(|&(name, _)| name).collect()
}

/// Dynamic shared memory of a decode attention block for `head_dim`: two stages of a K and a
/// V tile (kernels/attention_decode.cu's `DecodeShape`, which this must match), or the key
/// groups' partial sums reusing them, whichever is larger.
pub(super) fn decode_shared_bytes(head_dim: usize) -> u32 {
    const THREADS: usize = 128;
    const MAX_GROUP: usize = 8;
    let lanes_per_key = head_dim / 8;
    let iters = if head_dim >= 32 { 8 } else { 4 };
    let tile = (THREADS / 32) * (32 / lanes_per_key) * iters;
    let stages = 4 * tile * head_dim * 2;
    let partial_sums = (THREADS / lanes_per_key) * MAX_GROUP * head_dim * 4;
    stages.max(partial_sums) as u32
}

/// Rows of a prefill attention block and its dynamic shared memory (Q, K and V tiles) for
/// `head_dim`: kernels/attention_prefill.cu's `PrefillTile`, which this must match.
pub(super) fn prefill_tile(head_dim: usize) -> (usize, u32) {
    let (rows, keys) = if head_dim <= 128 { (128, 64) } else { (64, 32) };
    (rows, ((rows + 2 * keys) * (head_dim + 8) * 2) as u32)
}

/// The Gated DeltaNet kernels (gated_deltanet*.cu): most key dims a head's state column
/// holds in registers (`GDN_MAX_DK`).
pub const GDN_MAX_DK: usize = 128;
/// Tokens of a chunk and value columns of a block of the chunked delta rule (`GDN_CHUNK`,
/// `GDN_SLICE`).
pub(super) const GDN_CHUNK: usize = 64;
pub(super) const GDN_SLICE: usize = 32;

/// Floats per token and value head of the chunk scratch (`GDN_CHUNK_ROW`): the token's rows of
/// the chunk's T and P, its G and beta.
pub const GDN_CHUNK_ROW: usize = 2 * GDN_CHUNK + 4;

/// Dynamic shared memory of `gdn_chunk_prep` for key heads of `dk` dims: q and k rows of a
/// chunk, its L and T matrices, the decays and betas.
pub(super) fn gdn_chunk_prep_shared_bytes(dk: usize) -> u32 {
    let floats = 2 * GDN_CHUNK * (dk + 1) + 2 * GDN_CHUNK * (GDN_CHUNK + 1) + 2 * GDN_CHUNK;
    (floats * 4) as u32
}

/// Dynamic shared memory of `gdn_chunked`: q and k rows of a chunk, the state slice, the
/// slice's r and u rows, the chunk's T and P, the decays and betas.
pub(super) fn gdn_chunked_shared_bytes(dk: usize) -> u32 {
    let floats = 2 * GDN_CHUNK * (dk + 1)
        + dk * GDN_SLICE
        + 2 * GDN_CHUNK * GDN_SLICE
        + 2 * GDN_CHUNK * GDN_CHUNK
        + 2 * GDN_CHUNK;
    (floats * 4) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_index_the_table() {
        assert_eq!(qgemv_name(QuantType::Q4_0, 1, 0), "qgemv_q4_0_1_s1");
        assert_eq!(qgemv_name(QuantType::Q6K, 8, 2), "qgemv_q6_k_8_s4");
        assert_eq!(qgemv_name(QuantType::Q4K, 3, 3), "qgemv_q4_k_3_s8");
        assert_eq!(qgemv_name(QuantType::Q4K, 2, 1), "qgemv_q4_k_2_s2");
        assert_eq!(qdequant_name(QuantType::Q5K), "qdequant_q5_k");
        assert_eq!(qembed_name(QuantType::Q8_0), "qembed_q8_0");
        assert_eq!(qgemv_name(QuantType::Fp8, 1, 3), "qgemv_fp8_1_s8");
        assert_eq!(qdequant_name(QuantType::Fp8), "qdequant_fp8");
        assert_eq!(qembed_name(QuantType::Fp8), "qembed_fp8");
        assert_eq!(
            ordered_qgemv_name(QuantType::Q4_1, 2),
            "qgemv_ordered_q4_1_s4"
        );
        assert_eq!(
            ordered_qgemv_name(QuantType::Fp8, 3),
            "qgemv_ordered_fp8_s8"
        );
        assert_eq!(
            qgemv_names().len(),
            7 * GEMV_MAX_TOKENS * QGEMV_SPLITS.len() + QGEMV_SPLITS.len()
        );
        assert_eq!(qgemv_names()[1], "qgemv_q4_0_1_s2");
        assert_eq!(qdequant_names().len(), QuantType::ALL.len());
        assert_eq!(qembed_names()[7], "qembed_fp8");
    }
}
