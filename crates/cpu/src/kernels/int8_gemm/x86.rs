//! AVX-512 VNNI tiles of the int8 path: `MR` activation rows × `NC` weight rows, 256-bit
//! vectors (as fast per element as 512-bit ones on Zen 4, and 32 bytes is one Q4_K sub-block
//! pair or one Q6_K group, so activations are read in their natural order).
//!
//! Per 32 elements: `maddubs` (unsigned weight × signed activation, pairs summed to i16, which
//! cannot saturate: 2·63·127 < 2¹⁵), then `vpdpwssd` with the sub-block scales (pairs of i16
//! summed into the i32 lanes). That is lane `u` = Σ over elements `4u..4u + 4`, as the
//! portable code defines it.

use std::arch::x86_64::*;

use super::super::q8_activations::{Q8Activations, BLOCK};
use super::super::qgemm::Task;
use crate::quant::decode::{f16_at_ptr as f16_at, k4_scale_bytes};
use crate::simd::{prefetch_lines, TO_L2};
// The canonical 8-lane sum, the order the portable `reduce8` spells out.
use crate::simd::vec16::reduce8;
use ferrite_model::weights::DType;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn run(task: &Task<'_>, acts: &Q8Activations) {
    match task.matrix.dtype() {
        DType::Q4_K => columns::<Q4K>(task, acts),
        DType::Q6_K => columns::<Q6K>(task, acts),
        other => panic!("int8 path: {other:?} has no integer kernel"),
    }
}

/// A weight format's block as the tiles read it.
trait IntBlock {
    const BYTES: usize;
    /// Adds block `blk` (block `b` of its row) times block `b` of activation rows
    /// `r0..r0 + MR` into their f32 lanes: the integer sums, then `lane += scale · int` and
    /// the offset term.
    unsafe fn block<const MR: usize>(
        blk: *const u8,
        acts: &Q8Activations,
        r0: usize,
        b: usize,
        lanes: &mut [__m256; MR],
    );
}

#[inline(always)]
unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// i16 lane `j` of the result = lane `idx[j]` of `v`.
#[inline(always)]
unsafe fn pick16(v: __m256i, idx: [i16; 16]) -> __m256i {
    _mm256_permutexvar_epi16(_mm256_loadu_si256(idx.as_ptr() as *const __m256i), v)
}

struct Q4K;
impl IntBlock for Q4K {
    const BYTES: usize = 144;
    #[inline(always)]
    unsafe fn block<const MR: usize>(
        blk: *const u8,
        acts: &Q8Activations,
        r0: usize,
        b: usize,
        lanes: &mut [__m256; MR],
    ) {
        let (d, dmin) = (f16_at(blk), f16_at(blk.add(2)));
        let (sc, m) = k4_scale_bytes(blk.add(4));
        let scales = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
        let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(m as i64));
        let mut acc = [_mm256_setzero_si256(); MR];
        let xs: [*const u8; MR] = std::array::from_fn(|r| acts.q(r0 + r, b).as_ptr() as *const u8);
        let low4 = _mm256_set1_epi8(0x0f);
        for pair in 0..4 {
            let q = load256(blk.add(16 + 32 * pair));
            let lo = _mm256_and_si256(q, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low4);
            let s_lo = pick16(scales, [2 * pair as i16; 16]);
            let s_hi = pick16(scales, [2 * pair as i16 + 1; 16]);
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = xs[r].add(64 * pair);
                let p_lo = _mm256_maddubs_epi16(lo, load256(x));
                let p_hi = _mm256_maddubs_epi16(hi, load256(x.add(32)));
                *acc = _mm256_dpwssd_epi32(*acc, p_lo, s_lo);
                *acc = _mm256_dpwssd_epi32(*acc, p_hi, s_hi);
            }
        }
        for (r, (acc, lanes)) in acc.iter().zip(lanes.iter_mut()).enumerate() {
            let sums32 = _mm_loadu_si128(acts.sums32(r0 + r, b).as_ptr() as *const __m128i);
            let min_sums = _mm256_zextps128_ps256(_mm_cvtepi32_ps(_mm_madd_epi16(mins, sums32)));
            let dx = acts.d(r0 + r, b);
            let scale = _mm256_set1_ps(dx * d);
            let min_scale = _mm256_set1_ps(dx * dmin);
            *lanes = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*acc), scale, *lanes);
            *lanes = _mm256_fnmadd_ps(min_sums, min_scale, *lanes);
        }
    }
}

struct Q6K;
impl IntBlock for Q6K {
    const BYTES: usize = 210;
    #[inline(always)]
    unsafe fn block<const MR: usize>(
        blk: *const u8,
        acts: &Q8Activations,
        r0: usize,
        b: usize,
        lanes: &mut [__m256; MR],
    ) {
        let d = f16_at(blk.add(208));
        let scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(blk.add(192) as *const __m128i));
        let mut acc = [_mm256_setzero_si256(); MR];
        let xs: [*const u8; MR] = std::array::from_fn(|r| acts.q(r0 + r, b).as_ptr() as *const u8);
        let (low4, low2) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
        for half in 0..2 {
            let ql = [
                load256(blk.add(64 * half)),
                load256(blk.add(64 * half + 32)),
            ];
            let qh = load256(blk.add(128 + 32 * half));
            for g in 0..4 {
                let src = ql[g % 2];
                let nibble = if g < 2 {
                    _mm256_and_si256(src, low4)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16::<4>(src), low4)
                };
                let shifted = match g {
                    0 => qh,
                    1 => _mm256_srli_epi16::<2>(qh),
                    2 => _mm256_srli_epi16::<4>(qh),
                    _ => _mm256_srli_epi16::<6>(qh),
                };
                let top = _mm256_slli_epi16::<4>(_mm256_and_si256(shifted, low2));
                let q6 = _mm256_or_si256(nibble, top);
                let sub = (8 * half + 2 * g) as i16;
                // i16 lanes 0..8 (elements 0..16) take sub-block `sub`'s scale, 8..16 the next.
                let s = pick16(scales, std::array::from_fn(|i| sub + (i / 8) as i16));
                let start = 128 * half + 32 * g;
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = xs[r].add(start);
                    *acc = _mm256_dpwssd_epi32(*acc, _mm256_maddubs_epi16(q6, load256(x)), s);
                }
            }
        }
        for (r, (acc, lanes)) in acc.iter().zip(lanes.iter_mut()).enumerate() {
            let sums16 = _mm256_loadu_si256(acts.sums16(r0 + r, b).as_ptr() as *const __m256i);
            let offset = _mm256_slli_epi32::<5>(_mm256_madd_epi16(scales, sums16));
            let total = _mm256_sub_epi32(*acc, offset);
            let scale = _mm256_set1_ps(acts.d(r0 + r, b) * d);
            *lanes = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), scale, *lanes);
        }
    }
}

/// Weight rows in groups of 4, activation rows in tiles of up to 4 (16 accumulators side by
/// side; a weight block is decoded once per tile of rows).
#[inline(always)]
unsafe fn columns<F: IntBlock>(task: &Task<'_>, acts: &Q8Activations) {
    let mut c = task.c0;
    while c < task.c1 {
        let cols = 4.min(task.c1 - c);
        let mut r0 = 0;
        while r0 < task.m {
            let rows = 4.min(task.m - r0);
            macro_rules! by_shape {
                ($($r:literal),*) => {
                    match (rows, cols) {
                        $(($r, 4) => tile::<F, $r, 4>(task, acts, r0, c),)*
                        $(($r, _) => for cc in c..c + cols { tile::<F, $r, 1>(task, acts, r0, cc) },)*
                        _ => unreachable!("tiles have 1 to 4 rows"),
                    }
                };
            }
            by_shape!(1, 2, 3, 4);
            r0 += rows;
        }
        c += cols;
    }
}

/// `MR` activation rows from `r0` times `NC` weight rows from `c`.
#[inline(always)]
unsafe fn tile<F: IntBlock, const MR: usize, const NC: usize>(
    task: &Task<'_>,
    acts: &Q8Activations,
    r0: usize,
    c: usize,
) {
    let m = task.matrix;
    let (bytes, row_bytes) = (m.bytes().as_ptr(), m.row_bytes());
    let mut lanes = [[_mm256_setzero_ps(); MR]; NC];
    for b in 0..m.cols() / BLOCK {
        for (j, lanes) in lanes.iter_mut().enumerate() {
            let blk = bytes.add((c + j) * row_bytes + b * F::BYTES);
            // To L2: to L1, Q6_K's stream ran at half the speed (12 vs 22 GMAC/s a thread).
            prefetch_lines::<TO_L2>(blk.wrapping_add(2 * NC * row_bytes), F::BYTES);
            F::block::<MR>(blk, acts, r0, b, lanes);
        }
    }
    for (j, lanes) in lanes.iter().enumerate() {
        for (r, &v) in lanes.iter().enumerate() {
            task.out.write(r0 + r, c + j, reduce8(v));
        }
    }
}
