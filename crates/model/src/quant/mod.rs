//! Weight storage formats as descriptors, one file per format: what a block holds (its
//! weights and bytes, its fields in byte order), its GGML type id, its scalar dequantizer and
//! the dummy quantizer that makes random valid blocks of it. `DType` (here, re-exported by
//! crate::weights) names a format.
//!
//! The dequantizers follow ggml's `dequantize_row_*` (ggml-quants.c) operation for operation:
//! separate multiplies and adds, never fused. They are ferrite's one scalar decoder of each
//! format: the reference every backend's fast path is tested against bit for bit, and every
//! backend's generic path (decode into its working type), so each format runs everywhere. The
//! 32-element formats also expose `decode_block` over scales already read as f32, so a backend
//! that stores those blocks re-laid (the CPU's f32-scale layout) decodes them with this code.
//! `crate::dequant` is the checked entry point over whole rows and tensors. This module
//! imports nothing of the crate, so everything else may read it.

mod dtype;
mod floats;
pub mod fp8;
pub mod mxfp4;
mod q2_k;
mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
mod q5_k;
mod q6_k;
pub mod q8_0;
mod q8_k;

pub use dtype::DType;
pub use fp8::E4M3_MAX;

/// Dequantizes whole blocks of one format: `bytes` holds `out.len() / block_len` blocks. It
/// does not check lengths (`crate::dequant::dequantize_row` does).
pub type RowDequantizer = fn(bytes: &[u8], out: &mut [f32]);

/// One storage format of weights.
#[derive(Debug)]
pub struct Format {
    pub dtype: DType,
    /// As GGUF tools print it (`Q4_K`).
    pub name: &'static str,
    /// GGML's type id in a GGUF tensor info; `None` for ferrite's own (FP8).
    pub ggml_type: Option<u32>,
    /// Weights per block (1 for plain floats).
    pub block_len: usize,
    pub block_bytes: usize,
    /// The block's fields in byte order, (name, bytes): `d`/`m` f16 scale and min, `dmin`,
    /// `scales` (packed sub-block scales), `qh` (high bits), `qs`/`ql`/`q` quants.
    pub fields: &'static [(&'static str, usize)],
    /// The dummy quantizer: given a block of random bytes, writes its scale fields so that the
    /// block is valid and its weights come out at about `s`. `None`: no random blocks (dummy
    /// weights are drawn in bf16 instead).
    pub random_block: Option<fn(s: f32, out: &mut [u8])>,
    /// The scalar reference dequantizer of rows of this format.
    pub dequantize: RowDequantizer,
}

/// Every format ferrite reads.
pub const FORMATS: [&Format; 16] = [
    &floats::F32,
    &floats::F16,
    &floats::BF16,
    &q4_0::FORMAT,
    &q4_1::FORMAT,
    &q5_0::FORMAT,
    &q5_1::FORMAT,
    &q8_0::FORMAT,
    &q2_k::FORMAT,
    &q3_k::FORMAT,
    &q4_k::FORMAT,
    &q5_k::FORMAT,
    &q6_k::FORMAT,
    &q8_k::FORMAT,
    &fp8::FORMAT,
    &mxfp4::FORMAT,
];

/// The descriptor of `dtype`.
pub const fn format(dtype: DType) -> &'static Format {
    match dtype {
        DType::F32 => &floats::F32,
        DType::F16 => &floats::F16,
        DType::BF16 => &floats::BF16,
        DType::Q4_0 => &q4_0::FORMAT,
        DType::Q4_1 => &q4_1::FORMAT,
        DType::Q5_0 => &q5_0::FORMAT,
        DType::Q5_1 => &q5_1::FORMAT,
        DType::Q8_0 => &q8_0::FORMAT,
        DType::Q2_K => &q2_k::FORMAT,
        DType::Q3_K => &q3_k::FORMAT,
        DType::Q4_K => &q4_k::FORMAT,
        DType::Q5_K => &q5_k::FORMAT,
        DType::Q6_K => &q6_k::FORMAT,
        DType::Q8_K => &q8_k::FORMAT,
        DType::Fp8 => &fp8::FORMAT,
        DType::Mxfp4 => &mxfp4::FORMAT,
    }
}

/// The format of GGML type id `id`, as a GGUF tensor info writes it.
pub fn from_ggml_type(id: u32) -> Option<DType> {
    FORMATS
        .iter()
        .find(|f| f.ggml_type == Some(id))
        .map(|f| f.dtype)
}

/// The format named `name` (`q4_k`, `Q4_K`, `fp8`), case aside.
pub fn from_name(name: &str) -> Option<DType> {
    FORMATS
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(name))
        .map(|f| f.dtype)
}

/// The f16 at byte `at` of `b`, widened to f32 (exact).
#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The little-endian u32 at byte `at` of `b`.
#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// An f32 as the little-endian bytes of the nearest f16 (the scales of GGML blocks).
fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

#[cfg(test)]
mod tests;
