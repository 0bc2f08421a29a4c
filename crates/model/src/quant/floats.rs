//! The unquantized formats: f32, f16 and bf16, one weight per block.

use super::DType;
use super::Format;

/// A little-endian IEEE f32 per weight.
pub const F32: Format = Format {
    dtype: DType::F32,
    name: "F32",
    fields: &[("value", 4)],
    ggml_type: Some(0),
    block_len: 1,
    block_bytes: 4,
    random_block: None,
};

/// A little-endian IEEE f16 per weight.
pub const F16: Format = Format {
    dtype: DType::F16,
    name: "F16",
    fields: &[("value", 2)],
    ggml_type: Some(1),
    block_len: 1,
    block_bytes: 2,
    random_block: None,
};

/// The top half of an f32 per weight.
pub const BF16: Format = Format {
    dtype: DType::BF16,
    name: "BF16",
    fields: &[("value", 2)],
    ggml_type: Some(30),
    block_len: 1,
    block_bytes: 2,
    random_block: None,
};
