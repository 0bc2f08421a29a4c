//! Launchers of kernels/quant_gemv.cu and kernels/quant_dequant.cu: products, dequantization
//! and embedding lookups on GGUF-quantized matrices kept in their own bits (crate::quant).

use std::sync::LazyLock;

use super::gemv::gemv_split;
use super::launch::{grid1, Args, Kernels};
use super::names::GEMV_MAX_TOKENS;
use crate::device_ptr::DevicePtr;
use crate::quant::QuantType;

/// GEMV splits the quantized kernels are built for (warps per row).
const QGEMV_SPLITS: [usize; 2] = [1, 4];

/// Every quantized kernel's name: per type, the GEMVs by token count and split, then the
/// dequantizer and the embedding lookup.
static QUANT_NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut names = Vec::new();
    for q in QuantType::ALL {
        let s = q.kernel_suffix();
        for n in 1..=GEMV_MAX_TOKENS {
            for split in QGEMV_SPLITS {
                names.push(format!("qgemv_{s}_{n}_s{split}"));
            }
        }
        names.push(format!("qdequant_{s}"));
        names.push(format!("qembed_{s}"));
    }
    names
});

const PER_TYPE: usize = GEMV_MAX_TOKENS * QGEMV_SPLITS.len() + 2;

fn type_index(q: QuantType) -> usize {
    QuantType::ALL.iter().position(|&t| t == q).unwrap_or(0)
}

pub(super) fn quant_names() -> impl Iterator<Item = &'static str> {
    QUANT_NAMES.iter().map(String::as_str)
}

fn qgemv_name(q: QuantType, n: usize, split_index: usize) -> &'static str {
    let i = type_index(q) * PER_TYPE + (n - 1) * QGEMV_SPLITS.len() + split_index;
    &QUANT_NAMES[i]
}

fn qdequant_name(q: QuantType) -> &'static str {
    &QUANT_NAMES[type_index(q) * PER_TYPE + PER_TYPE - 2]
}

fn qembed_name(q: QuantType) -> &'static str {
    &QUANT_NAMES[type_index(q) * PER_TYPE + PER_TYPE - 1]
}

/// A quantized matrix's planes as kernel arguments (unused ones NULL).
fn with_planes(args: Args, planes: [Option<DevicePtr>; 3]) -> Args {
    planes.into_iter().fold(args, Args::nullable_ptr)
}

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

impl Kernels {
    pub fn qgemv(&self, a: &QuantGemvArgs) -> anyhow::Result<()> {
        let (rows, k, n) = (a.rows, a.k, a.n);
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "qgemv takes 1..=8 tokens, not {n}"
        );
        let split_index = usize::from(gemv_split(rows, k) > 1);
        let rows_per_block = 8 / QGEMV_SPLITS[split_index];
        // qgemv_<type>_<n>_s<split>(p0, p1, p2, x, y, rows, k, ldy)
        let args = with_planes(Args::new(), a.planes)
            .ptr(a.x)
            .ptr(a.y)
            .usize(rows)
            .usize(k)
            .usize(a.ldy);
        let name = qgemv_name(a.format, n, split_index);
        self.launch(name, grid1(rows.div_ceil(rows_per_block), 256), args)
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
        let unit_elems = if format.block_len() == 32 { 32 } else { 64 };
        let units = rows * k / unit_elems;
        let blocks = units.div_ceil(256).clamp(1, 65_535);
        // qdequant_<type>(p0, p1, p2, out, row0, rows, k)
        let args = with_planes(Args::new(), planes)
            .ptr(out)
            .usize(row0)
            .usize(rows)
            .usize(k);
        self.launch(qdequant_name(format), grid1(blocks, 256), args)
    }

    /// x[t] = table[tokens[t]] * scale (f32) for `n` tokens of a quantized embedding table.
    #[allow(clippy::too_many_arguments)]
    pub fn qembed(
        &self,
        format: QuantType,
        planes: [Option<DevicePtr>; 3],
        tokens: DevicePtr,
        x: DevicePtr,
        hidden: usize,
        scale: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        // qembed_<type>(p0, p1, p2, tokens, x, hidden, scale)
        let args = with_planes(Args::new(), planes)
            .ptr(tokens)
            .ptr(x)
            .usize(hidden)
            .f32(scale);
        self.launch(qembed_name(format), grid1(n, 128), args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_index_the_table() {
        assert_eq!(qgemv_name(QuantType::Q4_0, 1, 0), "qgemv_q4_0_1_s1");
        assert_eq!(qgemv_name(QuantType::Q6K, 8, 1), "qgemv_q6_k_8_s4");
        assert_eq!(qgemv_name(QuantType::Q4K, 3, 1), "qgemv_q4_k_3_s4");
        assert_eq!(qdequant_name(QuantType::Q5K), "qdequant_q5_k");
        assert_eq!(qembed_name(QuantType::Q8_0), "qembed_q8_0");
        assert_eq!(quant_names().count(), 7 * PER_TYPE);
    }
}
