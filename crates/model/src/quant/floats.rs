//! The unquantized formats: f32, f16 and bf16, one weight per block.

use super::f16_at;
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
    dequantize: f32_row,
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
    dequantize: f16_row,
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
    dequantize: bf16_row,
};

fn f32_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

fn f16_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *y = f16_at(b, 0);
    }
}

/// bf16 is the top half of an f32: widened by a shift, as ggml's `ggml_bf16_to_fp32` does
/// (which keeps a NaN's payload as it is, where `half`'s conversion would quiet it).
fn bf16_row(bytes: &[u8], out: &mut [f32]) {
    for (y, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *y = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}
