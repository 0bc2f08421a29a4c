//! AVX-512 VNNI tiles of the int8 path: up to `IntBlock::ROWS` activation rows × a pair of
//! weight rows.
//!
//! A block is read in four chunks of 64 elements, each one zmm register of weights: Q4_K's 32
//! bytes hold a chunk's two sub-blocks as low and high nibbles, Q6_K's 64 `ql` bytes hold two
//! groups, so one load (or a broadcast of 32 bytes) and a shift per half give the 64 weights in
//! the order the activations are stored. Per chunk: `maddubs` (unsigned weight × signed
//! activation, pairs summed to i16, which cannot saturate: 2·63·127 < 2¹⁵), then `vpdpwssd`
//! with the sub-block scales (pairs of i16 summed into the i32 lanes). Lane `u` of the zmm sums
//! elements `4u..4u + 4` of the chunk; at the block's end lanes `u` and `u + 8` are added, which
//! is the portable code's lane `u` (Σ over elements `4u..4u + 4` of every 32). Integer sums are
//! exact, so the float steps after them see the portable code's numbers.
//!
//! Zen 4 issues two 256-bit integer multiplies a cycle, one 512-bit: the zmm form halves the
//! instructions per multiply (decode and loads), not the multiplies. Those two multiplies per
//! 64 products per pair of rows bound the path at 32 products a cycle; the end of each block
//! (conversion, scaling, the offsets: about 3.5 more per pair of rows, done for two weight rows
//! at once in a zmm) and the weights' decode are what keep a thread well below it (measured:
//! docs/performance.md, '2026-12-05 02:00 UTC, the int8 path's tiles rebuilt for prefill').

use std::arch::x86_64::*;

use super::super::q8_activations::{Q8Activations, BLOCK};
use super::super::qgemm::Task;
use crate::quant::decode::{f16_at_ptr as f16_at, k4_scale_bytes};
use crate::simd::{prefetch_lines, TO_L2};
// The canonical 8-lane sum, the order the portable `reduce8` spells out.
use crate::simd::vec16::reduce8;
use ferrite_model::weights::DType;

/// Weight rows per tile: a pair, whose f32 lanes share a zmm register at each block's end.
const NC: usize = 2;
/// How many weight rows ahead blocks are prefetched: of 4, 8 and 16, the distance at which
/// one-row products from memory streamed fastest on 2 threads, the MoE's Q6_K output matrix
/// with `matmul_speed ... 1 int8` (measured: docs/performance.md, '2026-12-05 02:00 UTC, the
/// int8 path's tiles rebuilt for prefill').
const PREFETCH_ROWS: usize = 8;
/// Bytes of int8 activations a pass over a task's weight rows keeps in L2 (Zen 4: 1 MiB),
/// next to the task's weights: each activation tile is read once per `NC` weight rows.
const ACTS_L2_BYTES: usize = 384 * 1024;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
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
    /// Activation rows per tile: 2·ROWS zmm accumulators beside the pair's weights and
    /// scales and one activation chunk; the tile's f32 lanes wait in L1. Measured best of
    /// 6, 8, 10, 12 on the 1.5B's shapes (1536x8960, 8960x1536), one thread.
    const ROWS: usize;
    /// What a block's chunks share (scales).
    type Head: Copy;
    /// What the end of a block of two weight rows needs, side by side in the two halves of
    /// zmm registers (scales, offsets).
    type Pair: Copy;
    unsafe fn head(blk: *const u8) -> Self::Head;
    /// The 64 weights of chunk `p` (u8) and the i16 scale of each pair of them.
    unsafe fn chunk(blk: *const u8, head: &Self::Head, p: usize) -> (__m512i, __m512i);
    unsafe fn pair(blks: [*const u8; 2], heads: &[Self::Head; 2]) -> Self::Pair;
    /// Adds the block's integer lanes `acc` (two weight rows' eight lanes, activation row
    /// `r`, block `b`) into `lanes`: the portable code's `lane += scale · int` and its offset.
    unsafe fn finish(
        pair: &Self::Pair,
        acc: __m512i,
        acts: &Q8Activations,
        r: usize,
        b: usize,
        lanes: &mut __m512,
    );
}

/// i16 lane `j` of the result = lane `idx[j]` of `v` (indices below 16).
#[inline(always)]
unsafe fn pick16(v: __m256i, idx: [i16; 32]) -> __m512i {
    _mm512_permutexvar_epi16(
        _mm512_loadu_si512(idx.as_ptr() as *const _),
        _mm512_castsi256_si512(v),
    )
}

/// The same 32 bytes in both halves, shifted right by `lo` bits (low half) and `hi` bits (high
/// half) within each i16 lane.
#[inline(always)]
unsafe fn halves_shifted(p: *const u8, lo: i16, hi: i16) -> __m512i {
    let both = _mm512_broadcast_i64x4(_mm256_loadu_si256(p as *const __m256i));
    let shifts: [i16; 32] = std::array::from_fn(|i| if i < 16 { lo } else { hi });
    _mm512_srlv_epi16(both, _mm512_loadu_si512(shifts.as_ptr() as *const _))
}

/// `a` in the low eight f32 lanes, `b` in the high eight.
#[inline(always)]
unsafe fn halves_ps(a: f32, b: f32) -> __m512 {
    _mm512_insertf32x8::<1>(_mm512_set1_ps(a), _mm256_set1_ps(b))
}

struct Q4K;
impl IntBlock for Q4K {
    const BYTES: usize = 144;
    const ROWS: usize = 8;
    /// The eight scales (i16 lanes 0..8) and the eight mins (bytes), unpacked once a block.
    type Head = (__m256i, u64);
    /// d, dmin, and the eight mins (i16) of each row in i16 lanes 0..8 and 16..24.
    type Pair = (__m512, __m512, __m512i);
    #[inline(always)]
    unsafe fn head(blk: *const u8) -> Self::Head {
        let (sc, m) = k4_scale_bytes(blk.add(4));
        let scales = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
        (scales, m)
    }
    #[inline(always)]
    unsafe fn chunk(blk: *const u8, head: &Self::Head, p: usize) -> (__m512i, __m512i) {
        // Sub-block 2p in the low nibbles of the chunk's 32 bytes, 2p + 1 in the high.
        let q = halves_shifted(blk.add(16 + 32 * p), 0, 4);
        let w = _mm512_and_si512(q, _mm512_set1_epi8(0x0f));
        let s = pick16(head.0, std::array::from_fn(|i| (2 * p + i / 16) as i16));
        (w, s)
    }
    #[inline(always)]
    unsafe fn pair(blks: [*const u8; 2], heads: &[Self::Head; 2]) -> Self::Pair {
        // Each row's mins in i16 lanes 0..8 of its half, zeros above.
        let mins = _mm512_inserti64x4::<1>(
            _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(heads[0].1 as i64))),
            _mm256_cvtepu8_epi16(_mm_cvtsi64_si128(heads[1].1 as i64)),
        );
        (
            halves_ps(f16_at(blks[0]), f16_at(blks[1])),
            halves_ps(f16_at(blks[0].add(2)), f16_at(blks[1].add(2))),
            mins,
        )
    }
    #[inline(always)]
    unsafe fn finish(
        pair: &Self::Pair,
        acc: __m512i,
        acts: &Q8Activations,
        r: usize,
        b: usize,
        lanes: &mut __m512,
    ) {
        let (d, dmin, mins) = *pair;
        // The eight sums of 32 in lanes 0..8 of each half (the mins are 0 above them).
        let sums32 =
            _mm512_broadcast_i32x4(_mm_loadu_si128(acts.sums32(r, b).as_ptr() as *const __m128i));
        let min_sums = _mm512_cvtepi32_ps(_mm512_madd_epi16(mins, sums32));
        let dx = _mm512_set1_ps(acts.d(r, b));
        *lanes = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dx, d), *lanes);
        *lanes = _mm512_fnmadd_ps(min_sums, _mm512_mul_ps(dx, dmin), *lanes);
    }
}

struct Q6K;
impl IntBlock for Q6K {
    const BYTES: usize = 210;
    const ROWS: usize = 10;
    /// The sixteen scales (i16).
    type Head = __m256i;
    /// d and the sixteen scales of each row.
    type Pair = (__m512, __m512i);
    #[inline(always)]
    unsafe fn head(blk: *const u8) -> Self::Head {
        _mm256_cvtepi8_epi16(_mm_loadu_si128(blk.add(192) as *const __m128i))
    }
    #[inline(always)]
    unsafe fn chunk(blk: *const u8, head: &Self::Head, p: usize) -> (__m512i, __m512i) {
        // Chunk p is groups 2·(p % 2) and 2·(p % 2) + 1 of half p / 2: the low (p even) or
        // high nibbles of the half's 64 `ql` bytes, two bits each of its 32 `qh` bytes (stored
        // 0..64; the -32 is applied through the sums in `finish`).
        let (half, gp) = ((p / 2) as i16, (p % 2) as i16);
        let ql = _mm512_loadu_si512(blk.add(64 * half as usize) as *const _);
        let nibble = _mm512_and_si512(
            _mm512_srl_epi16(ql, _mm_cvtsi32_si128(4 * gp as i32)),
            _mm512_set1_epi8(0x0f),
        );
        let qh = halves_shifted(blk.add(128 + 32 * half as usize), 4 * gp, 4 * gp + 2);
        let top = _mm512_slli_epi16::<4>(_mm512_and_si512(qh, _mm512_set1_epi8(3)));
        let w = _mm512_or_si512(nibble, top);
        // i16 lane i holds elements 2i, 2i + 1: sub-block 4p + i / 8 of sixteen.
        let s = pick16(*head, std::array::from_fn(|i| (4 * p + i / 8) as i16));
        (w, s)
    }
    #[inline(always)]
    unsafe fn pair(blks: [*const u8; 2], heads: &[Self::Head; 2]) -> Self::Pair {
        (
            halves_ps(f16_at(blks[0].add(208)), f16_at(blks[1].add(208))),
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(heads[0]), heads[1]),
        )
    }
    #[inline(always)]
    unsafe fn finish(
        pair: &Self::Pair,
        acc: __m512i,
        acts: &Q8Activations,
        r: usize,
        b: usize,
        lanes: &mut __m512,
    ) {
        let (d, scales) = *pair;
        let sums16 = _mm512_broadcast_i64x4(_mm256_loadu_si256(
            acts.sums16(r, b).as_ptr() as *const __m256i
        ));
        let offset = _mm512_slli_epi32::<5>(_mm512_madd_epi16(scales, sums16));
        let total = _mm512_sub_epi32(acc, offset);
        let scale = _mm512_mul_ps(_mm512_set1_ps(acts.d(r, b)), d);
        *lanes = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), scale, *lanes);
    }
}

/// The task's weight rows in pairs, activation rows in tiles of `F::ROWS`, activations
/// taken in slices that stay in L2 while every weight group passes over them.
#[inline(always)]
unsafe fn columns<F: IntBlock>(task: &Task<'_>, acts: &Q8Activations) {
    let slice_rows = (ACTS_L2_BYTES / task.matrix.cols()).max(F::ROWS) / F::ROWS * F::ROWS;
    let mut s0 = 0;
    while s0 < task.m {
        let s1 = (s0 + slice_rows).min(task.m);
        let mut c = task.c0;
        while c < task.c1 {
            let cols = NC.min(task.c1 - c);
            let mut r0 = s0;
            while r0 < s1 {
                let rows = F::ROWS.min(s1 - r0);
                macro_rules! by_rows {
                    ($($r:literal)*) => {
                        match (rows, cols) {
                            $(($r, 1) => tile::<F, $r, 1>(task, acts, r0, c),
                              ($r, _) => tile::<F, $r, 2>(task, acts, r0, c),)*
                            _ => unreachable!("tiles have 1 to 10 rows"),
                        }
                    };
                }
                by_rows!(1 2 3 4 5 6 7 8 9 10);
                r0 += rows;
            }
            c += cols;
        }
        s0 = s1;
    }
}

/// Activation rows `r0..r0 + R` times weight rows `c..c + C` (C is 1 or 2; a single row is
/// run as a pair with itself and written once).
#[inline(always)]
unsafe fn tile<F: IntBlock, const R: usize, const C: usize>(
    task: &Task<'_>,
    acts: &Q8Activations,
    r0: usize,
    c: usize,
) {
    let m = task.matrix;
    let (bytes, row_bytes) = (m.bytes().as_ptr(), m.row_bytes());
    // Lanes 0..8: weight row c, 8..16: row c + 1.
    let mut lanes = [_mm512_setzero_ps(); R];
    for b in 0..m.cols() / BLOCK {
        let blks: [*const u8; 2] =
            std::array::from_fn(|j| bytes.add((c + j.min(C - 1)) * row_bytes + b * F::BYTES));
        for blk in &blks[..C] {
            // To L2: into L1 the fast int8 stream runs out of L1's miss buffers (Q6_K measured
            // much slower so: docs/performance.md, 'Measurements formerly in source comments').
            prefetch_lines::<TO_L2>(blk.wrapping_add(PREFETCH_ROWS * row_bytes), F::BYTES);
        }
        // Written out, not `array::from_fn`: a closure does not inherit the target features,
        // and the intrinsics inlined into it would become calls.
        let heads = [F::head(blks[0]), F::head(blks[1])];
        let xs: [*const i8; R] = std::array::from_fn(|r| acts.q(r0 + r, b).as_ptr());
        let mut acc = [[_mm512_setzero_si512(); 2]; R];
        for p in 0..BLOCK / 64 {
            let w = [
                F::chunk(blks[0], &heads[0], p),
                F::chunk(blks[1], &heads[1], p),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_loadu_si512(xs[r].add(64 * p) as *const _);
                for (acc, (w, s)) in acc.iter_mut().zip(&w) {
                    *acc = _mm512_dpwssd_epi32(*acc, _mm512_maddubs_epi16(*w, x), *s);
                }
            }
        }
        let pair = F::pair(blks, &heads);
        for (r, (acc, lanes)) in acc.iter().zip(lanes.iter_mut()).enumerate() {
            // Lane u of a row's eight = its zmm lanes u + (u + 8): the two 32s of a chunk.
            let lo = _mm512_shuffle_i64x2::<0x44>(acc[0], acc[1]);
            let hi = _mm512_shuffle_i64x2::<0xee>(acc[0], acc[1]);
            F::finish(&pair, _mm512_add_epi32(lo, hi), acts, r0 + r, b, lanes);
        }
    }
    for (r, lanes) in lanes.iter().enumerate() {
        task.out
            .write(r0 + r, c, reduce8(_mm512_castps512_ps256(*lanes)));
        if C == 2 {
            let hi = _mm512_extractf32x8_ps::<1>(*lanes);
            task.out.write(r0 + r, c + 1, reduce8(hi));
        }
    }
}
