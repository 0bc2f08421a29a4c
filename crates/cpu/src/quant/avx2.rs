//! AVX2 dequantizers for the legacy 32-element blocks that dominate decode time. Each produces
//! exactly the scalar result (same integer values, then the same unfused multiply and add).
//! Reachable only through `row_dequantizer`, which selects them after detecting AVX2.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::f16_at;

/// Converts 8 integer lanes, scales by `d` and (when `HAS_MIN`) adds `m`, stores 8 floats.
#[inline(always)]
unsafe fn store_scaled<const HAS_MIN: bool>(q: __m256i, d: __m256, m: __m256, out: *mut f32) {
    let v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
    let v = if HAS_MIN { _mm256_add_ps(v, m) } else { v };
    _mm256_storeu_ps(out, v);
}

/// Bytes 0..8 and 8..16 of `v`, widened to 32-bit lanes.
#[inline(always)]
unsafe fn widen_u8(v: __m128i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepu8_epi32(v),
        _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)),
    )
}

/// Q4_0 / Q4_1: 16 bytes of nibbles at `qs` to 32 values.
#[inline(always)]
unsafe fn nibbles<const HAS_MIN: bool>(qs: *const u8, offset: i32, d: f32, m: f32, out: *mut f32) {
    let bytes = _mm_loadu_si128(qs as *const __m128i);
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(bytes, mask);
    let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    let (dv, mv, off) = (
        _mm256_set1_ps(d),
        _mm256_set1_ps(m),
        _mm256_set1_epi32(offset),
    );
    for (i, half) in [lo, hi].into_iter().enumerate() {
        let (a, b) = widen_u8(half);
        store_scaled::<HAS_MIN>(_mm256_sub_epi32(a, off), dv, mv, out.add(16 * i));
        store_scaled::<HAS_MIN>(_mm256_sub_epi32(b, off), dv, mv, out.add(16 * i + 8));
    }
}

#[target_feature(enable = "avx2")]
unsafe fn q4_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
        nibbles::<false>(
            block.as_ptr().add(2),
            8,
            f16_at(block, 0),
            0.0,
            y.as_mut_ptr(),
        );
    }
}

#[target_feature(enable = "avx2")]
unsafe fn q4_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(32)) {
        nibbles::<true>(
            block.as_ptr().add(4),
            0,
            f16_at(block, 0),
            f16_at(block, 2),
            y.as_mut_ptr(),
        );
    }
}

#[target_feature(enable = "avx2")]
unsafe fn q5_0(bytes: &[u8], out: &mut [f32]) {
    let bit_of_lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    let sixteen = _mm256_set1_epi32(16);
    for (block, y) in bytes.chunks_exact(22).zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(f16_at(block, 0));
        // Element e (0..32) takes bit e of qh as its fifth bit.
        let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        let bytes = _mm_loadu_si128(block.as_ptr().add(6) as *const __m128i);
        let mask = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(bytes, mask);
        let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
        let (l0, l1) = widen_u8(lo);
        let (h0, h1) = widen_u8(hi);
        for (g, q) in [l0, l1, h0, h1].into_iter().enumerate() {
            let bits = _mm256_set1_epi32(((qh >> (8 * g)) & 0xFF) as i32);
            let set = _mm256_cmpeq_epi32(_mm256_and_si256(bits, bit_of_lane), bit_of_lane);
            let q = _mm256_sub_epi32(_mm256_or_si256(q, _mm256_and_si256(set, sixteen)), sixteen);
            store_scaled::<false>(q, d, d, y.as_mut_ptr().add(8 * g));
        }
    }
}

#[target_feature(enable = "avx2")]
unsafe fn q8_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(34).zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(f16_at(block, 0));
        for g in 0..4 {
            let q = _mm_loadl_epi64(block.as_ptr().add(2 + 8 * g) as *const __m128i);
            store_scaled::<false>(_mm256_cvtepi8_epi32(q), d, d, y.as_mut_ptr().add(8 * g));
        }
    }
}

// Safe entry points for `row_dequantizer`, which hands them out only when AVX2 is present.
// `chunks_exact` keeps every pointer inside its block and its 32-float output.
pub(super) fn dequantize_q4_0(bytes: &[u8], out: &mut [f32]) {
    // SAFETY: selected only after `is_x86_feature_detected!("avx2")`.
    unsafe { q4_0(bytes, out) }
}
pub(super) fn dequantize_q4_1(bytes: &[u8], out: &mut [f32]) {
    // SAFETY: as above.
    unsafe { q4_1(bytes, out) }
}
pub(super) fn dequantize_q5_0(bytes: &[u8], out: &mut [f32]) {
    // SAFETY: as above.
    unsafe { q5_0(bytes, out) }
}
pub(super) fn dequantize_q8_0(bytes: &[u8], out: &mut [f32]) {
    // SAFETY: as above.
    unsafe { q8_0(bytes, out) }
}
