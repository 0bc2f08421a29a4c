//! SIMD decoders of GGML blocks into 16-lane f32 vectors, written once for every [`Vec16`] ISA.
//!
//! Each decoder yields exactly the values of `ferrite_model::dequant` for its format (same integer
//! values, then the same unfused multiplies and adds), so whichever kernel decodes a weight —
//! the fused small-batch kernel, the panel dequantizer, the embedding lookup — it sees one f32
//! value. The unit tests check that bit for bit against the scalar code. The 32-element types
//! are read in the kernels' repacked layout (f32 scales, see `repack`); K-quants and floats as
//! GGML stores them.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::simd::vec16::Vec16;

/// A GGML block layout that can be decoded 16 elements at a time.
pub trait BlockFormat {
    /// Elements per block (a multiple of 16).
    const ELEMS: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// Whether the fused kernels prefetch this format's blocks into L2 rather than L1
    /// (`simd::prefetch_lines`): whichever streamed faster on Zen 4.
    const PREFETCH_TO_L2: bool = false;
    /// Decodes the block at `p`, handing its 16-element chunks to `sink` in increasing order
    /// (chunk `c` holds elements `16c..16c + 16`). The order matters: fused kernels accumulate
    /// the chunks as they come, and the canonical dot product runs over increasing indices.
    unsafe fn decode<S: Vec16>(p: *const u8, sink: impl FnMut(usize, S::V));
}

/// The f32 at `p` (unaligned).
#[inline(always)]
unsafe fn f32_at_ptr(p: *const u8) -> f32 {
    (p as *const f32).read_unaligned()
}

/// The f16 at `p` (unaligned), widened to f32 with F16C (exact, as any conversion).
#[inline(always)]
pub(crate) unsafe fn f16_at_ptr(p: *const u8) -> f32 {
    let bits = u16::from_le_bytes([*p, *p.add(1)]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline(always)]
unsafe fn load16(p: *const u8) -> __m128i {
    _mm_loadu_si128(p as *const __m128i)
}

#[inline(always)]
unsafe fn low_nibbles(v: __m128i) -> __m128i {
    _mm_and_si128(v, _mm_set1_epi8(0x0F))
}

#[inline(always)]
unsafe fn high_nibbles(v: __m128i) -> __m128i {
    _mm_and_si128(_mm_srli_epi16::<4>(v), _mm_set1_epi8(0x0F))
}

/// 0..16 as floats: the values of a 4-bit field, the base of lookup tables.
static IOTA: [f32; 32] = [
    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0,
    17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0,
];
/// -16..16 as floats: 5-bit fields with Q5_0's offset of 16 (and -8..8 for Q4_0's).
static CENTRED: [f32; 32] = [
    -16.0, -15.0, -14.0, -13.0, -12.0, -11.0, -10.0, -9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.0,
    -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0,
    15.0,
];

/// Byte `j` = `value` where bit `j` of `bits` is set, else 0.
#[inline(always)]
unsafe fn bits_to_bytes(bits: u16, value: i8) -> __m128i {
    let spread = _mm_shuffle_epi8(
        _mm_set1_epi16(bits as i16),
        _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
    );
    let select = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    let hit = _mm_cmpeq_epi8(_mm_and_si128(spread, select), select);
    _mm_and_si128(hit, _mm_set1_epi8(value))
}

pub struct Q4_0;
impl BlockFormat for Q4_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 20;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = S::splat(f32_at_ptr(p));
        let qs = load16(p.add(4));
        if S::HAS_LUT {
            // Entry i = (i - 8) * d, exactly the arithmetic below; the lookup ignores the
            // bits above the nibble, so neither nibble needs masking.
            let table = S::mul(S::load(CENTRED.as_ptr().add(8)), d);
            sink(0, S::lut16(table, qs));
            sink(1, S::lut16(table, _mm_srli_epi16::<4>(qs)));
            return;
        }
        let eight = _mm_set1_epi8(8);
        let lo = _mm_sub_epi8(low_nibbles(qs), eight);
        let hi = _mm_sub_epi8(high_nibbles(qs), eight);
        sink(0, S::mul(S::from_i8(lo), d));
        sink(1, S::mul(S::from_i8(hi), d));
    }
}

pub struct Q4_1;
impl BlockFormat for Q4_1 {
    const ELEMS: usize = 32;
    const BYTES: usize = 24;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = S::splat(f32_at_ptr(p));
        let m = S::splat(f32_at_ptr(p.add(4)));
        let qs = load16(p.add(8));
        if S::HAS_LUT {
            let table = S::add(S::mul(S::load(IOTA.as_ptr()), d), m);
            sink(0, S::lut16(table, qs));
            sink(1, S::lut16(table, _mm_srli_epi16::<4>(qs)));
            return;
        }
        sink(0, S::add(S::mul(S::from_u8(low_nibbles(qs)), d), m));
        sink(1, S::add(S::mul(S::from_u8(high_nibbles(qs)), d), m));
    }
}

/// Q5_0 / Q5_1: a fifth bit per element from `qh` (bit `j` for element `j`).
#[inline(always)]
unsafe fn five_bit(qh: u32, qs: __m128i) -> (__m128i, __m128i) {
    let lo = _mm_or_si128(low_nibbles(qs), bits_to_bytes(qh as u16, 0x10));
    let hi = _mm_or_si128(high_nibbles(qs), bits_to_bytes((qh >> 16) as u16, 0x10));
    (lo, hi)
}

#[inline(always)]
unsafe fn u32_at(p: *const u8) -> u32 {
    u32::from_le_bytes([*p, *p.add(1), *p.add(2), *p.add(3)])
}

pub struct Q5_0;
impl BlockFormat for Q5_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 24;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = S::splat(f32_at_ptr(p));
        let (lo, hi) = five_bit(u32_at(p.add(4)), load16(p.add(8)));
        if S::HAS_LUT {
            let low = S::mul(S::load(CENTRED.as_ptr()), d);
            let high = S::mul(S::load(CENTRED.as_ptr().add(16)), d);
            sink(0, S::lut32(low, high, lo));
            sink(1, S::lut32(low, high, hi));
            return;
        }
        let sixteen = _mm_set1_epi8(16);
        sink(0, S::mul(S::from_i8(_mm_sub_epi8(lo, sixteen)), d));
        sink(1, S::mul(S::from_i8(_mm_sub_epi8(hi, sixteen)), d));
    }
}

pub struct Q5_1;
impl BlockFormat for Q5_1 {
    const ELEMS: usize = 32;
    const BYTES: usize = 28;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = S::splat(f32_at_ptr(p));
        let m = S::splat(f32_at_ptr(p.add(4)));
        let (lo, hi) = five_bit(u32_at(p.add(8)), load16(p.add(12)));
        if S::HAS_LUT {
            let low = S::add(S::mul(S::load(IOTA.as_ptr()), d), m);
            let high = S::add(S::mul(S::load(IOTA.as_ptr().add(16)), d), m);
            sink(0, S::lut32(low, high, lo));
            sink(1, S::lut32(low, high, hi));
            return;
        }
        sink(0, S::add(S::mul(S::from_u8(lo), d), m));
        sink(1, S::add(S::mul(S::from_u8(hi), d), m));
    }
}

pub struct Q8_0;
impl BlockFormat for Q8_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 36;
    // Eight-bit weights stream fast enough to run out of L1's miss buffers when prefetched
    // into L1 (measured at one x row, 2 threads, `matmul_speed q8_0 4864 896 2 32 1,4`:
    // docs/performance.md, '2026-12-04 22:31 and 23:05 UTC'); the other formats measured the
    // same either way.
    const PREFETCH_TO_L2: bool = true;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = S::splat(f32_at_ptr(p));
        sink(0, S::mul(S::from_i8(load16(p.add(4))), d));
        sink(1, S::mul(S::from_i8(load16(p.add(20))), d));
    }
}

/// Q4_K/Q5_K: the eight 6-bit sub-block scales and mins as the bytes of two u64s, unpacked
/// from their 12 bytes at `scales` all at once (GGML's packing, word by word).
#[inline(always)]
pub(crate) unsafe fn k4_scale_bytes(scales: *const u8) -> (u64, u64) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let (u0, u1, u2) = (u32_at(scales), u32_at(scales.add(4)), u32_at(scales.add(8)));
    let sc = (u0 & LOW6) as u64 | ((((u2 & LOW4) | (((u0 >> 6) & LOW2) << 4)) as u64) << 32);
    let m = (u1 & LOW6) as u64 | (((((u2 >> 4) & LOW4) | (((u1 >> 6) & LOW2) << 4)) as u64) << 32);
    (sc, m)
}

/// Q4_K/Q5_K: the eight sub-block scales `d·sc` and mins `dmin·m` of a super-block, multiplied
/// in one go; each is the same f32 product `scale_min_k4` and a scalar multiply give.
#[inline(always)]
pub(crate) unsafe fn k4_scales(scales: *const u8, d: f32, dmin: f32) -> ([f32; 8], [f32; 8]) {
    let (sc, m) = k4_scale_bytes(scales);
    (widen8(sc, d), widen8(m, dmin))
}

/// The 8 bytes of `bytes` as floats, each multiplied by `by`.
#[inline(always)]
unsafe fn widen8(bytes: u64, by: f32) -> [f32; 8] {
    let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64)));
    let mut out = [0.0f32; 8];
    _mm256_storeu_ps(out.as_mut_ptr(), _mm256_mul_ps(v, _mm256_set1_ps(by)));
    out
}

pub struct Q4K;
impl BlockFormat for Q4K {
    const ELEMS: usize = 256;
    const BYTES: usize = 144;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let (d, dmin) = (f16_at_ptr(p), f16_at_ptr(p.add(2)));
        let scales = p.add(4);
        let sub_scales = k4_scales(scales, d, dmin);
        for pair in 0..4 {
            let qs = p.add(16 + 32 * pair);
            let (q0, q1) = (load16(qs), load16(qs.add(16)));
            // Sub-block 2·pair takes the low nibbles of these 32 bytes, 2·pair + 1 the high ones.
            if S::HAS_LUT {
                for sub in 0..2 {
                    let s = 2 * pair + sub;
                    let (d1, m1) = (S::splat(sub_scales.0[s]), S::splat(sub_scales.1[s]));
                    // Entry q = d1 * q - m1, the same two roundings as per element.
                    let table = S::sub(S::mul(S::load(IOTA.as_ptr()), d1), m1);
                    let (i0, i1) = if sub == 0 {
                        (q0, q1)
                    } else {
                        (_mm_srli_epi16::<4>(q0), _mm_srli_epi16::<4>(q1))
                    };
                    let chunk = 4 * pair + 2 * sub;
                    sink(chunk, S::lut16(table, i0));
                    sink(chunk + 1, S::lut16(table, i1));
                }
                continue;
            }
            for sub in 0..2 {
                let (v0, v1) = if sub == 0 {
                    (low_nibbles(q0), low_nibbles(q1))
                } else {
                    (high_nibbles(q0), high_nibbles(q1))
                };
                let s = 2 * pair + sub;
                let (d1, m1) = (S::splat(sub_scales.0[s]), S::splat(sub_scales.1[s]));
                let chunk = 4 * pair + 2 * sub;
                sink(chunk, S::sub(S::mul(S::from_u8(v0), d1), m1));
                sink(chunk + 1, S::sub(S::mul(S::from_u8(v1), d1), m1));
            }
        }
    }
}

/// Byte `l` = 16 where `qh[l]` has bit `bit` set, else 0 (Q5_K's fifth bit).
#[inline(always)]
unsafe fn fifth_bit(qh: __m128i, bit: __m128i) -> __m128i {
    let set = _mm_cmpeq_epi8(_mm_and_si128(qh, bit), bit);
    _mm_and_si128(set, _mm_set1_epi8(16))
}

pub struct Q5K;
impl BlockFormat for Q5K {
    const ELEMS: usize = 256;
    const BYTES: usize = 176;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let (d, dmin) = (f16_at_ptr(p), f16_at_ptr(p.add(2)));
        let scales = p.add(4);
        let (qh0, qh1) = (load16(p.add(16)), load16(p.add(32)));
        let sub_scales = k4_scales(scales, d, dmin);
        for pair in 0..4 {
            let ql = p.add(48 + 32 * pair);
            let (q0, q1) = (load16(ql), load16(ql.add(16)));
            for sub in 0..2 {
                let s = 2 * pair + sub;
                let (n0, n1) = if sub == 0 {
                    (low_nibbles(q0), low_nibbles(q1))
                } else {
                    (high_nibbles(q0), high_nibbles(q1))
                };
                let bit = _mm_set1_epi8((1u8 << s) as i8);
                let v0 = _mm_or_si128(n0, fifth_bit(qh0, bit));
                let v1 = _mm_or_si128(n1, fifth_bit(qh1, bit));
                let (d1, m1) = (S::splat(sub_scales.0[s]), S::splat(sub_scales.1[s]));
                let chunk = 4 * pair + 2 * sub;
                sink(chunk, S::sub(S::mul(S::from_u8(v0), d1), m1));
                sink(chunk + 1, S::sub(S::mul(S::from_u8(v1), d1), m1));
            }
        }
    }
}

pub struct Q6K;
impl BlockFormat for Q6K {
    const ELEMS: usize = 256;
    const BYTES: usize = 210;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let d = f16_at_ptr(p.add(208));
        let low2 = _mm_set1_epi8(3);
        let thirty_two = _mm_set1_epi8(32);
        for half in 0..2 {
            let (ql, qh) = (p.add(64 * half), p.add(128 + 32 * half));
            let sc = p.add(192 + 8 * half);
            let ql_lo = [load16(ql), load16(ql.add(16))];
            let ql_hi = [load16(ql.add(32)), load16(ql.add(48))];
            let high = [load16(qh), load16(qh.add(16))];
            // Group g (32 elements) takes nibble g / 2 of ql[32 * (g % 2) + l] and bits
            // 2g..2g+2 of qh[l]; chunks must reach the sink in increasing order.
            for g in 0..4 {
                for part in 0..2 {
                    let source = if g % 2 == 0 { ql_lo[part] } else { ql_hi[part] };
                    let nibble = if g < 2 {
                        low_nibbles(source)
                    } else {
                        high_nibbles(source)
                    };
                    let shifted = match g {
                        0 => high[part],
                        1 => _mm_srli_epi16::<2>(high[part]),
                        2 => _mm_srli_epi16::<4>(high[part]),
                        _ => _mm_srli_epi16::<6>(high[part]),
                    };
                    let top = _mm_slli_epi16::<4>(_mm_and_si128(shifted, low2));
                    let q = _mm_sub_epi8(_mm_or_si128(nibble, top), thirty_two);
                    let scale = *sc.add(part + 2 * g) as i8 as f32;
                    let chunk = 8 * half + 2 * g + part;
                    sink(chunk, S::mul(S::splat(d * scale), S::from_i8(q)));
                }
            }
        }
    }
}

pub struct F32;
impl BlockFormat for F32 {
    const ELEMS: usize = 16;
    const BYTES: usize = 64;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        sink(0, S::load(p as *const f32));
    }
}

pub struct F16;
impl BlockFormat for F16 {
    const ELEMS: usize = 16;
    const BYTES: usize = 32;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        sink(0, S::from_f16(p));
    }
}

/// FP8 (ferrite_model::fp8): the f32 scale, then 128 e4m3 bytes. A byte becomes the f16 with
/// its exponent and mantissa bits under f16's (exactly e4m3 x 2^-8, e4m3's subnormals on
/// f16's; the NaN codes on an f16 NaN), F16C widens it, and multiplying by 256 (exact) and then
/// by the scale rounds once, as the scalar table's `e4m3 * scale` does.
pub struct Fp8;
impl BlockFormat for Fp8 {
    const ELEMS: usize = 128;
    const BYTES: usize = 132;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        let (unit, scale) = (S::splat(256.0), S::splat(f32_at_ptr(p)));
        let (low7, sign_bit) = (_mm256_set1_epi16(0x7f), _mm256_set1_epi16(0x80));
        let f16_nan = _mm256_set1_epi16(0x7e00);
        let mut halves = [0u16; 16];
        for c in 0..8 {
            let bytes = _mm256_cvtepu8_epi16(load16(p.add(4 + 16 * c)));
            let magnitude = _mm256_and_si256(bytes, low7);
            let sign = _mm256_slli_epi16(_mm256_and_si256(bytes, sign_bit), 8);
            let nan = _mm256_and_si256(_mm256_cmpeq_epi16(magnitude, low7), f16_nan);
            let h = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(magnitude, 7), sign), nan);
            _mm256_storeu_si256(halves.as_mut_ptr() as *mut __m256i, h);
            let v = S::from_f16(halves.as_ptr() as *const u8);
            sink(c, S::mul(S::mul(v, unit), scale));
        }
    }
}

pub struct Bf16;
impl BlockFormat for Bf16 {
    const ELEMS: usize = 16;
    const BYTES: usize = 32;
    #[inline(always)]
    unsafe fn decode<S: Vec16>(p: *const u8, mut sink: impl FnMut(usize, S::V)) {
        sink(0, S::from_bf16(p));
    }
}
