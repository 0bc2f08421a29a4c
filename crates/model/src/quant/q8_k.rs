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
    dequantize: row,
};

fn decode_block(b: &[u8], y: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (yj, &q) in y.iter_mut().zip(&b[4..260]) {
        *yj = q as i8 as f32 * d;
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(292).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
