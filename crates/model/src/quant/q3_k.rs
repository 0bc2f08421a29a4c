//! Q3_K (GGML K-quant): 256 weights in 110 bytes.

use super::f16_at;
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
    dequantize: row,
};

/// The sixteen 6-bit scales (low 4 bits in bytes 0..8, high 2 bits in bytes 8..12),
/// unpacked four at a time as ggml does, offset by 32.
fn scales(packed: &[u8]) -> [i32; 16] {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let word =
        |i: usize| u32::from_le_bytes([packed[i], packed[i + 1], packed[i + 2], packed[i + 3]]);
    let (a0, a1, tmp) = (word(0), word(4), word(8));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut scales = [0i32; 16];
    for (i, s) in scales.iter_mut().enumerate() {
        *s = aux[i / 4].to_le_bytes()[i % 4] as i32 - 32;
    }
    scales
}

/// Walks the output in 16-element parts, as Q2_K does (and for the same reason).
fn decode_block(b: &[u8], y: &mut [f32]) {
    let (hmask, qs) = (&b[0..32], &b[32..96]);
    let scales = scales(&b[96..108]);
    let d_all = f16_at(b, 108);
    let mut is = 0;
    let mut m = 1u8;
    for (half, y) in y.chunks_exact_mut(128).enumerate() {
        let q = &qs[half * 32..half * 32 + 32];
        for (shift, y) in [0, 2, 4, 6].into_iter().zip(y.chunks_exact_mut(32)) {
            for (part, y) in y.chunks_exact_mut(16).enumerate() {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for (l, yl) in y.iter_mut().enumerate() {
                    let i = part * 16 + l;
                    let sub = if hmask[i] & m != 0 { 0 } else { 4 };
                    *yl = dl * (((q[i] >> shift) & 3) as i32 - sub) as f32;
                }
            }
            m <<= 1;
        }
    }
}

fn row(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(110).zip(out.chunks_exact_mut(256)) {
        decode_block(b, y);
    }
}
