//! The quantized formats the CUDA backend keeps quantized on the device (the GGUF block types
//! and ferrite's FP8 blocks, ferrite_model::fp8), and how their
//! blocks are laid out there: the file's bits, each block cut into planes at fixed byte
//! offsets so that every load the kernels make (kernels/quant.cuh) is a naturally aligned
//! 16-, 4- or 2-byte word. Q4_K and Q5_K blocks (144 and 176 bytes) are already aligned and
//! stay whole; Q6_K's 210-byte block becomes 208 bytes of quants and scales plus its f16 scale;
//! the 32-element formats put their f16 scales apart from their quants. Same bytes, same
//! count: a quantized matrix takes exactly its file size on the device (an FP8 one 3% more: its
//! scales once more in the order cuBLASLt reads them, crate::fp8_gemm).

use ferrite_model::weights::DType;

/// A block format with device kernels (quant_gemv.cu, quant_dequant.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantType {
    Q4_0,
    Q4_1,
    Q5_0,
    Q8_0,
    Q4K,
    Q5K,
    Q6K,
    /// FP8 e4m3 in blocks of 128 with an f32 scale (ferrite_model::fp8).
    Fp8,
}

impl QuantType {
    pub const ALL: [QuantType; 8] = [
        QuantType::Q4_0,
        QuantType::Q4_1,
        QuantType::Q5_0,
        QuantType::Q8_0,
        QuantType::Q4K,
        QuantType::Q5K,
        QuantType::Q6K,
        QuantType::Fp8,
    ];

    /// The device format of a file dtype, if it has one (other types are widened to bf16).
    pub fn of(dtype: DType) -> Option<QuantType> {
        Some(match dtype {
            DType::Q4_0 => QuantType::Q4_0,
            DType::Q4_1 => QuantType::Q4_1,
            DType::Q5_0 => QuantType::Q5_0,
            DType::Q8_0 => QuantType::Q8_0,
            DType::Q4_K => QuantType::Q4K,
            DType::Q5_K => QuantType::Q5K,
            DType::Q6_K => QuantType::Q6K,
            DType::Fp8 => QuantType::Fp8,
            _ => return None,
        })
    }

    pub fn dtype(self) -> DType {
        match self {
            QuantType::Q4_0 => DType::Q4_0,
            QuantType::Q4_1 => DType::Q4_1,
            QuantType::Q5_0 => DType::Q5_0,
            QuantType::Q8_0 => DType::Q8_0,
            QuantType::Q4K => DType::Q4_K,
            QuantType::Q5K => DType::Q5_K,
            QuantType::Q6K => DType::Q6_K,
            QuantType::Fp8 => DType::Fp8,
        }
    }

    /// The suffix of its kernels' names (`qgemv_q4_k_1_s1`).
    pub fn kernel_suffix(self) -> &'static str {
        match self {
            QuantType::Q4_0 => "q4_0",
            QuantType::Q4_1 => "q4_1",
            QuantType::Q5_0 => "q5_0",
            QuantType::Q8_0 => "q8_0",
            QuantType::Q4K => "q4_k",
            QuantType::Q5K => "q5_k",
            QuantType::Q6K => "q6_k",
            QuantType::Fp8 => "fp8",
        }
    }

    /// Elements per block (32 or 256).
    pub fn block_len(self) -> usize {
        self.dtype().block_len()
    }

    /// Elements one GPU thread decodes at a time (a "unit" in kernels/quant.cuh): a whole
    /// 32-element block, a quarter of a 256-element one, or of an FP8 block of 128.
    pub fn unit_len(self) -> usize {
        match self.block_len() {
            32 => 32,
            128 => 32,
            _ => 64,
        }
    }

    /// The fields of the format's block (ferrite_model::quant) after which a new plane
    /// starts: the scales apart from the quants where the quants would otherwise start at an
    /// offset that is not a multiple of 16.
    fn cuts(self) -> &'static [&'static str] {
        match self {
            QuantType::Q4_0 | QuantType::Q8_0 => &["d"],
            QuantType::Q4_1 => &["m"],
            QuantType::Q5_0 => &["d", "qh"],
            QuantType::Q4K | QuantType::Q5K => &[],
            QuantType::Q6K => &["scales"],
            QuantType::Fp8 => &["scale"],
        }
    }

    /// Bytes of each plane per block, in the order the block's bytes are cut (they sum to the
    /// file's block size): the format's fields, grouped between the cuts.
    pub fn plane_bytes(self) -> Vec<usize> {
        let mut planes = vec![0];
        for &(field, bytes) in ferrite_model::quant::format(self.dtype()).fields {
            *planes.last_mut().expect("planes start with one") += bytes;
            if self.cuts().contains(&field) {
                planes.push(0);
            }
        }
        planes.retain(|&bytes| bytes > 0);
        planes
    }

    /// Up to how many tokens the CUDA-core GEMV (quant_gemv.cu) serves this format: FP8 takes
    /// the tensor cores (fp8_gemv_mma.cu) from two tokens on: the CUDA-core FP8 GEMV is the
    /// faster at one token and far slower at eight (measured: docs/performance.md, '2026-12-04
    /// 20:09-20:32 UTC: FP8 weights kept as FP8').
    pub fn cuda_core_gemv_tokens(self) -> usize {
        match self {
            QuantType::Fp8 => 1,
            _ => 8,
        }
    }

    /// Whether a matrix with rows of `k` elements can be kept in this format: whole blocks.
    pub fn fits(self, k: usize) -> bool {
        k.is_multiple_of(self.block_len())
    }
}

/// `bytes` (whole blocks of `q`, as in the file) cut into `q`'s planes: plane j holds the j-th
/// piece of every block, blocks in order.
pub fn split_planes(q: QuantType, bytes: &[u8]) -> Vec<Vec<u8>> {
    let sizes = &q.plane_bytes();
    let block: usize = sizes.iter().sum();
    let blocks = bytes.len() / block;
    if sizes.len() == 1 {
        return vec![bytes[..blocks * block].to_vec()];
    }
    let mut planes: Vec<Vec<u8>> = sizes
        .iter()
        .map(|s| Vec::with_capacity(s * blocks))
        .collect();
    for b in bytes.chunks_exact(block) {
        let mut at = 0;
        for (plane, &size) in planes.iter_mut().zip(sizes.iter()) {
            plane.extend_from_slice(&b[at..at + size]);
            at += size;
        }
    }
    planes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_cover_the_block_and_keep_every_byte() {
        for q in QuantType::ALL {
            let block = q.dtype().block_bytes();
            assert_eq!(q.plane_bytes().iter().sum::<usize>(), block, "{q:?}");
            assert_eq!(QuantType::of(q.dtype()), Some(q));
            // Every plane but a 2-byte scale plane is 4-byte aligned; quant planes 16-byte.
            let bytes: Vec<u8> = (0..3 * block).map(|i| (i * 7 + 3) as u8).collect();
            let planes = split_planes(q, &bytes);
            let mut rebuilt = Vec::new();
            for b in 0..3 {
                for (plane, &size) in planes.iter().zip(&q.plane_bytes()) {
                    rebuilt.extend_from_slice(&plane[b * size..(b + 1) * size]);
                }
            }
            assert_eq!(rebuilt, bytes, "{q:?}");
        }
    }

    #[test]
    fn quant_planes_are_whole_16_byte_words() {
        for q in QuantType::ALL {
            let last = *q.plane_bytes().iter().max().unwrap();
            assert_eq!(
                last % 16,
                0,
                "{q:?}: the largest plane must be 16-byte loads"
            );
        }
        assert_eq!(QuantType::of(DType::Q5_1), None);
        assert!(QuantType::Q4K.fits(4096) && !QuantType::Q4K.fits(896));
    }

    #[test]
    fn planes_are_the_aligned_cuts_of_each_block() {
        // The cuts the kernels (kernels/quant.cuh) read: scales apart from 16-byte quants.
        let known: [(QuantType, &[usize]); 8] = [
            (QuantType::Q4_0, &[2, 16]),
            (QuantType::Q4_1, &[4, 16]),
            (QuantType::Q5_0, &[2, 4, 16]),
            (QuantType::Q8_0, &[2, 32]),
            (QuantType::Q4K, &[144]),
            (QuantType::Q5K, &[176]),
            (QuantType::Q6K, &[208, 2]),
            (QuantType::Fp8, &[4, 128]),
        ];
        for (q, planes) in known {
            assert_eq!(q.plane_bytes(), planes, "{q:?}");
        }
    }

    #[test]
    fn planes_cut_blocks_between_the_formats_fields() {
        for q in QuantType::ALL {
            let fields = ferrite_model::quant::format(q.dtype()).fields;
            let ends: Vec<usize> = fields
                .iter()
                .scan(0, |at, &(_, bytes)| {
                    *at += bytes;
                    Some(*at)
                })
                .collect();
            let mut at = 0;
            for plane in q.plane_bytes() {
                at += plane;
                assert!(
                    ends.contains(&at),
                    "{q:?}: a plane ends inside a field at {at}"
                );
            }
        }
    }
}
