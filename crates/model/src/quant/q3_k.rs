//! Q3_K (GGML K-quant): 256 weights in 110 bytes.

use super::DType;
use super::Format;

/// 32 bytes of high bits, 64 bytes of 2-bit low quants, 12 bytes of packed 6-bit scales, d: f16.
pub const FORMAT: Format = Format {
    dtype: DType::Q3_K,
    name: "Q3_K",
    fields: &[("hmask", 32), ("qs", 64), ("scales", 12), ("d", 2)],
    ggml_type: Some(11),
    block_len: 256,
    block_bytes: 110,
    random_block: None,
};
