//! Row dequantizers built on the SIMD block decoders, one per (ISA, format), over rows in the
//! kernels' layout (`repack` for the 32-element types). Each gives the scalar dequantizer's
//! values bit for bit (tested in `quant::tests`).

#![cfg(target_arch = "x86_64")]

use ferrite_model::weights::DType;

use super::decode::{self, BlockFormat};
use super::{portable_row_dequantizer, RowDequantizer};
use crate::simd::vec16::{Avx2, Avx512, Vec16};

/// Dequantizes whole blocks of `F` from `bytes` into `out`; returns how many elements.
#[inline(always)]
unsafe fn rows<S: Vec16, F: BlockFormat>(bytes: &[u8], out: &mut [f32]) -> usize {
    let blocks = (bytes.len() / F::BYTES).min(out.len() / F::ELEMS);
    let (src, dst) = (bytes.as_ptr(), out.as_mut_ptr());
    for b in 0..blocks {
        let block_out = dst.add(b * F::ELEMS);
        F::decode::<S>(
            src.add(b * F::BYTES),
            #[inline(always)]
            |chunk, v| S::store(block_out.add(16 * chunk), v),
        );
    }
    blocks * F::ELEMS
}

/// Finishes a row the SIMD loop left short (float rows of a length not a multiple of 16;
/// floats are not repacked, so the GGML scalar code reads them).
fn finish_row(dtype: DType, bytes: &[u8], out: &mut [f32], done: usize) {
    if done < out.len() {
        let byte_offset = dtype.row_bytes(done);
        if let Ok(scalar) = portable_row_dequantizer(dtype) {
            scalar(&bytes[byte_offset..], &mut out[done..]);
        }
    }
}

macro_rules! isa_module {
    ($isa:ident, $simd:ty, $features:literal, $($name:ident: $dtype:ident => $format:ty),*) => {
        mod $isa {
            use super::*;
            $(
                pub fn $name(bytes: &[u8], out: &mut [f32]) {
                    #[target_feature(enable = $features)]
                    unsafe fn simd(bytes: &[u8], out: &mut [f32]) -> usize {
                        rows::<$simd, $format>(bytes, out)
                    }
                    // SAFETY: `for_dtype` hands these out only after detecting the ISA.
                    let done = unsafe { simd(bytes, out) };
                    finish_row(DType::$dtype, bytes, out, done);
                }
            )*

            pub fn for_dtype(dtype: DType) -> Option<RowDequantizer> {
                match dtype {
                    $(DType::$dtype => Some($name),)*
                    _ => None,
                }
            }
        }
    };
}

macro_rules! formats {
    ($isa:ident, $simd:ty, $features:literal) => {
        isa_module!($isa, $simd, $features,
            q4_0: Q4_0 => decode::Q4_0, q4_1: Q4_1 => decode::Q4_1,
            q5_0: Q5_0 => decode::Q5_0, q5_1: Q5_1 => decode::Q5_1,
            q8_0: Q8_0 => decode::Q8_0, q4_k: Q4_K => decode::Q4K,
            q5_k: Q5_K => decode::Q5K, q6_k: Q6_K => decode::Q6K,
            f32: F32 => decode::F32, f16: F16 => decode::F16, bf16: BF16 => decode::Bf16,
            fp8: Fp8 => decode::Fp8);
    };
}

formats!(
    avx512,
    Avx512,
    "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"
);
formats!(avx2, Avx2, "avx2,fma,f16c");

/// The SIMD dequantizer of `dtype` for the AVX-512 build.
pub fn avx512_rows(dtype: DType) -> Option<RowDequantizer> {
    avx512::for_dtype(dtype)
}

/// The SIMD dequantizer of `dtype` for the AVX2 build.
pub fn avx2_rows(dtype: DType) -> Option<RowDequantizer> {
    avx2::for_dtype(dtype)
}
