//! Sixteen f32 lanes as one vector type, so that each SIMD kernel is written once and compiled
//! twice: for AVX-512 (one zmm register) and for AVX2 (a pair of ymm registers).
//!
//! Lane `j` of a [`Vec16::V`] is the accumulator of the canonical dot product (see `simd`) for
//! indices `i ≡ j (mod 16)`, whichever ISA holds it; [`Vec16::reduce`] sums the lanes in the
//! canonical order. So the AVX-512 and AVX2 builds of a kernel give the same bits.
//!
//! Every method is `#[inline(always)]` and must only be reached from a function compiled with
//! the ISA's target features (the `isa_entry!` wrappers in `matmul`); that is what makes the
//! `unsafe` sound.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

pub trait Vec16 {
    type V: Copy;
    /// Weight rows a fused (dequantize-and-multiply) kernel works on at once.
    const FUSED_COLS: usize;
    /// Whether the fused kernels also take 8 x rows at once (over 2 weight rows: 16
    /// accumulators), which needs 32 vector registers.
    const FUSED_WIDE: bool;
    /// Whether [`Vec16::lut16`] and [`Vec16::lut32`] are single instructions (table lookups
    /// then replace the convert-multiply-add of 4- and 5-bit weights).
    const HAS_LUT: bool;

    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    unsafe fn load(p: *const f32) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `a * b + c`, rounded once.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// The 16 bytes of `v` as unsigned integers, converted to f32.
    unsafe fn from_u8(v: __m128i) -> Self::V;
    /// The 16 bytes of `v` as signed integers, converted to f32.
    unsafe fn from_i8(v: __m128i) -> Self::V;
    /// 16 IEEE half floats at `p`.
    unsafe fn from_f16(p: *const u8) -> Self::V;
    /// 16 bfloat16 values at `p`.
    unsafe fn from_bf16(p: *const u8) -> Self::V;
    /// Lane `j` = `table[idx[j] & 15]` (only with `HAS_LUT`).
    unsafe fn lut16(table: Self::V, idx: __m128i) -> Self::V;
    /// Lane `j` = `(lo ++ hi)[idx[j] & 31]` (only with `HAS_LUT`).
    unsafe fn lut32(lo: Self::V, hi: Self::V, idx: __m128i) -> Self::V;
    /// The sum of the lanes in the canonical order:
    /// `s8[j] = l[j] + l[j+8]`, `s4[j] = s8[j] + s8[j+4]`, `s2[j] = s4[j] + s4[j+2]`,
    /// result `s2[0] + s2[1]`.
    unsafe fn reduce(v: Self::V) -> f32;
}

/// Sums the 8 lanes of `s8` as `reduce` specifies (shared by both ISAs).
#[inline(always)]
pub(crate) unsafe fn reduce8(s8: __m256) -> f32 {
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<0b01>(s2, s2));
    _mm_cvtss_f32(s1)
}

/// AVX-512 F/BW/DQ/VL: one zmm register.
pub struct Avx512;

impl Vec16 for Avx512 {
    type V = __m512;
    const FUSED_COLS: usize = 4;
    const FUSED_WIDE: bool = true;
    const HAS_LUT: bool = true;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        _mm512_storeu_ps(p, v)
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn from_u8(v: __m128i) -> __m512 {
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v))
    }
    #[inline(always)]
    unsafe fn from_i8(v: __m128i) -> __m512 {
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v))
    }
    #[inline(always)]
    unsafe fn from_f16(p: *const u8) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
    #[inline(always)]
    unsafe fn from_bf16(p: *const u8) -> __m512 {
        let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(wide))
    }
    #[inline(always)]
    unsafe fn lut16(table: __m512, idx: __m128i) -> __m512 {
        _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(idx), table)
    }
    #[inline(always)]
    unsafe fn lut32(lo: __m512, hi: __m512, idx: __m128i) -> __m512 {
        _mm512_permutex2var_ps(lo, _mm512_cvtepu8_epi32(idx), hi)
    }
    #[inline(always)]
    unsafe fn reduce(v: __m512) -> f32 {
        let lo = _mm512_castps512_ps256(v);
        let hi = _mm512_extractf32x8_ps::<1>(v);
        reduce8(_mm256_add_ps(lo, hi))
    }
}

/// Eight bfloat16 values at `p` as f32 (AVX2).
#[inline(always)]
unsafe fn bf16x8(p: *const u8) -> __m256 {
    let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
}

/// AVX2 + FMA + F16C: lanes 0..8 in the first ymm register, 8..16 in the second.
pub struct Avx2;

impl Vec16 for Avx2 {
    type V = (__m256, __m256);
    const FUSED_COLS: usize = 2;
    const FUSED_WIDE: bool = false;
    const HAS_LUT: bool = false;

    #[inline(always)]
    unsafe fn zero() -> Self::V {
        (_mm256_setzero_ps(), _mm256_setzero_ps())
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self::V {
        (_mm256_set1_ps(x), _mm256_set1_ps(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self::V {
        (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self::V) {
        _mm256_storeu_ps(p, v.0);
        _mm256_storeu_ps(p.add(8), v.1);
    }
    #[inline(always)]
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        (
            _mm256_fmadd_ps(a.0, b.0, c.0),
            _mm256_fmadd_ps(a.1, b.1, c.1),
        )
    }
    #[inline(always)]
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V {
        (_mm256_mul_ps(a.0, b.0), _mm256_mul_ps(a.1, b.1))
    }
    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        (_mm256_add_ps(a.0, b.0), _mm256_add_ps(a.1, b.1))
    }
    #[inline(always)]
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V {
        (_mm256_sub_ps(a.0, b.0), _mm256_sub_ps(a.1, b.1))
    }
    #[inline(always)]
    unsafe fn from_u8(v: __m128i) -> Self::V {
        (
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(v))),
        )
    }
    #[inline(always)]
    unsafe fn from_i8(v: __m128i) -> Self::V {
        (
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(v))),
        )
    }
    #[inline(always)]
    unsafe fn from_f16(p: *const u8) -> Self::V {
        (
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            _mm256_cvtph_ps(_mm_loadu_si128(p.add(16) as *const __m128i)),
        )
    }
    #[inline(always)]
    unsafe fn from_bf16(p: *const u8) -> Self::V {
        (bf16x8(p), bf16x8(p.add(16)))
    }
    unsafe fn lut16(_table: Self::V, _idx: __m128i) -> Self::V {
        unreachable!("AVX2 has no 16-entry table lookup (HAS_LUT is false)")
    }
    unsafe fn lut32(_lo: Self::V, _hi: Self::V, _idx: __m128i) -> Self::V {
        unreachable!("AVX2 has no 32-entry table lookup (HAS_LUT is false)")
    }
    #[inline(always)]
    unsafe fn reduce(v: Self::V) -> f32 {
        reduce8(_mm256_add_ps(v.0, v.1))
    }
}
