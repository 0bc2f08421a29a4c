//! Q5_1 (GGML): 32 weights in 24 bytes.

use super::DType;
use super::Format;

/// d: f16, m: f16, qh: 4 bytes of fifth bits, then 16 bytes of nibbles; weight = q * d + m.
pub const FORMAT: Format = Format {
    dtype: DType::Q5_1,
    name: "Q5_1",
    fields: &[("d", 2), ("m", 2), ("qh", 4), ("qs", 16)],
    ggml_type: Some(7),
    block_len: 32,
    block_bytes: 24,
    random_block: None,
};
