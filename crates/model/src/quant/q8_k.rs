//! Q8_K (GGML K-quant, the activations' format of llama.cpp's K-quant dot products): 256 weights in 292 bytes.

use super::DType;
use super::Format;

/// d: f32, 256 signed bytes, 16 i16 block sums (unused by the dequantizer).
pub const FORMAT: Format = Format {
    dtype: DType::Q8_K,
    name: "Q8_K",
    fields: &[("d", 4), ("qs", 256), ("bsums", 32)],
    ggml_type: Some(15),
    block_len: 256,
    block_bytes: 292,
    random_block: None,
};
