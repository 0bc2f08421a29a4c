//! `DType`: the name of a weight format (what it is: its descriptor, `super::format`).

/// Element types a weight can be stored in.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    /// FP8 (e4m3) weights in ferrite's own block layout (`crate::fp8`): each run of 128
    /// consecutive weights of a row is stored as its f32 scale and then the 128 e4m3 bytes
    /// (132 bytes; a weight is `e4m3 * scale`). FP8 checkpoints and `--quantization fp8` load
    /// into it; GGUF has no such type.
    Fp8,
    /// MXFP4 (`super::mxfp4`): 32 E2M1 weights sharing an E8M0 exponent, GGUF's type 39 and
    /// Hugging Face's `mxfp4` checkpoints (gpt-oss's experts).
    Mxfp4,
}

impl DType {
    /// Elements per quantization block (1 for plain floats).
    pub const fn block_len(self) -> usize {
        super::format(self).block_len
    }
    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        super::format(self).block_bytes
    }
    /// Bytes of a row of `n` elements (`n` must be a multiple of `block_len`).
    pub fn row_bytes(self, n: usize) -> usize {
        n / self.block_len() * self.block_bytes()
    }
}
