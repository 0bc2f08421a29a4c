//! Q2_K (GGML K-quant): 256 weights in 84 bytes.

use super::DType;
use super::Format;

/// 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit quants, d: f16, dmin: f16.
pub const FORMAT: Format = Format {
    dtype: DType::Q2_K,
    name: "Q2_K",
    fields: &[("scales", 16), ("qs", 64), ("d", 2), ("dmin", 2)],
    ggml_type: Some(10),
    block_len: 256,
    block_bytes: 84,
    random_block: None,
};
