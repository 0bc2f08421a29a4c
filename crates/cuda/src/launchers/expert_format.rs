//! How an expert stack is kept on the device (bf16, MXFP4, or a GGUF block type), the bytes
//! its planes take, and its kernels' name suffix: what the loader, the launchers and the
//! kernel name tables (super::names) share.

use crate::device_ptr::DevicePtr;
use crate::quant::QuantType;
use ferrite_model::weights::DType;

/// How an expert stack's weights are stored on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertFormat {
    Bf16,
    /// MXFP4 blocks of 32 (gpt-oss; kernels/mxfp4.cuh) in two planes: 16 code bytes a block,
    /// then an exponent byte a block.
    Mxfp4,
    /// A GGUF block type kept as in the file, cut into crate::quant's planes (Q8_0, Q4_K,
    /// Q5_K, Q6_K: `EXPERT_QUANT_TYPES`), decoded in registers by kernels/quant_pieces.cuh.
    Quant(QuantType),
}

/// The GGUF block types whose expert stacks stay quantized on the device; the others are
/// widened to bf16 at load.
pub const EXPERT_QUANT_TYPES: [QuantType; 4] = [
    QuantType::Q8_0,
    QuantType::Q4K,
    QuantType::Q5K,
    QuantType::Q6K,
];

impl ExpertFormat {
    /// Every format with kernels, in the order of the kernel name tables (super::names).
    pub const ALL: [ExpertFormat; 6] = [
        ExpertFormat::Bf16,
        ExpertFormat::Mxfp4,
        ExpertFormat::Quant(EXPERT_QUANT_TYPES[0]),
        ExpertFormat::Quant(EXPERT_QUANT_TYPES[1]),
        ExpertFormat::Quant(EXPERT_QUANT_TYPES[2]),
        ExpertFormat::Quant(EXPERT_QUANT_TYPES[3]),
    ];

    /// The format a stack stored as `dtype` in its file is kept in (`widen`: the GGUF block
    /// types as bf16 all the same, for A/B runs).
    pub fn for_file(dtype: DType, widen: bool) -> ExpertFormat {
        match (dtype, QuantType::of(dtype)) {
            (DType::Mxfp4, _) => ExpertFormat::Mxfp4,
            (_, Some(q)) if !widen && EXPERT_QUANT_TYPES.contains(&q) => ExpertFormat::Quant(q),
            _ => ExpertFormat::Bf16,
        }
    }

    /// The bytes of its planes (first, second) for a stack of `elements` weights.
    pub fn plane_bytes(self, elements: usize) -> [usize; 2] {
        match self {
            ExpertFormat::Bf16 => [2 * elements, 0],
            ExpertFormat::Mxfp4 => [elements / 2, elements / 32],
            ExpertFormat::Quant(q) => {
                let blocks = elements / q.block_len();
                let per_block = q.plane_bytes();
                [0, 1].map(|i| per_block.get(i).map_or(0, |b| b * blocks))
            }
        }
    }

    /// Its kernels' name suffix (`moe_down_q4_k_s1_r8`).
    pub fn kernel_suffix(self) -> &'static str {
        match self {
            ExpertFormat::Bf16 => "bf16",
            ExpertFormat::Mxfp4 => "mxfp4",
            ExpertFormat::Quant(q) => q.kernel_suffix(),
        }
    }

    /// The multiple of which k must be: whole blocks along a row.
    pub(super) fn k_multiple(self) -> usize {
        match self {
            ExpertFormat::Bf16 => 8,
            ExpertFormat::Mxfp4 => 32,
            ExpertFormat::Quant(q) => q.block_len(),
        }
    }

    pub(super) fn index(self) -> anyhow::Result<usize> {
        ExpertFormat::ALL
            .iter()
            .position(|&f| f == self)
            .ok_or_else(|| anyhow::anyhow!("no expert kernels for {self:?} weights"))
    }
}

/// An expert stack `[experts, rows, k]` on the device.
#[derive(Debug, Clone, Copy)]
pub struct ExpertMatrix {
    pub format: ExpertFormat,
    /// The first plane: bf16 values, MXFP4's codes, a block type's first plane.
    pub values: DevicePtr,
    /// The second plane, for the formats that have one: MXFP4's exponents, Q8_0's quants
    /// (its first plane is the scales), Q6_K's f16 scales.
    pub second_plane: Option<DevicePtr>,
}
