//! The bf16 path's products of few x rows for the k-quant types of Q4_K_M files (Q4_K, Q6_K),
//! on AVX-512 BF16's `vdpbf16ps`. `matmul` sends it one-row products (decode at batch 1): from
//! four rows up the exact kernels are as fast or faster (`matmul::BF16_DECODE_MAX_ROWS`).
//!
//! AMX tiles (`bf16_gemm`) need every weight widened to bf16 in memory first, which costs more
//! than a decode step's products; and the exact kernels (`qgemm`) spend most of a decode step
//! turning each weight into an f32 (`d·sc·q − m`) before its one multiply-add. Here a weight's
//! quant stays an integer: `q` (0..63) is a bf16 exactly, and with the exponent bits of 128
//! or-ed in, `0x4300 | q` is the bf16 `128 + q`, one bitwise instruction for 32 weights.
//! `vdpbf16ps` multiplies 32 of them by 32 bf16 x values into 16 f32 lanes, the sub-block's
//! scale multiplies that sum once, and the offset (128, the quant's zero point, the min)
//! comes off per sub-block through x's own sums (`Bf16Activations::sums16`):
//!
//! `Σ x·(d·sc·(q − z) − m) = d·sc·Σ x·(128 + q) − (d·sc·(128 + z) + m)·Σ x`.
//!
//! Both sums are of the same bf16-rounded x, products exact in f32, so the only rounding the
//! path adds is x's to bf16 (the weights keep their exact values, finer than the tiles'
//! bf16 weights). The 128 offset costs f32 headroom of a few bits of 24, far below x's 8.
//! Each output's operations run in one order whatever the batch, so results do not depend on
//! how many rows share the step (within this kernel; prefill takes the tiles).

use ferrite_model::weights::DType;

use super::bf16_activations::Bf16Activations;
use super::qgemm::Task;

/// Whether this kernel multiplies matrices of `dtype`.
pub fn supports(dtype: DType) -> bool {
    matches!(dtype, DType::Q4_K | DType::Q6_K)
}

/// Whether this machine has the instructions (AVX-512 F, BW and BF16).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Columns `c0..c1` of the task's output from bf16 activations (unpadded rows and their sums).
pub fn run(task: &Task<'_>, acts: &Bf16Activations) {
    let k = task.matrix.cols();
    assert_eq!(acts.k(), k, "bf16 activations of another width");
    assert!(acts.rows() >= task.m, "bf16 activations hold too few rows");
    assert!(supports(task.matrix.dtype()) && k.is_multiple_of(256));
    assert!(task.c1 <= task.matrix.rows() && task.out.len >= task.m * task.out.n);
    assert!(available(), "bf16 decode kernel without AVX-512 BF16");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the instructions are available (checked above); shapes checked above.
    unsafe {
        x86::run(task, acts)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::*;
    use crate::quant::decode::{f16_at_ptr, k4_scales};
    use crate::simd::{prefetch_lines, TO_L1};

    /// Weight rows decoded once and multiplied into this many x rows at a time.
    const MAX_ROWS: usize = 4;
    /// Weight rows side by side (each with its own accumulator per x row).
    const COLS: usize = 2;

    /// One super-block's 256 weights of a weight row, as `vdpbf16ps` takes them: 8 vectors of
    /// 32 bf16 values `128 + q`, the scale of each vector's 16 lanes, and the per-16-elements
    /// coefficients of x's sums.
    struct Decoded {
        quants: [__m512bh; 8],
        scales: [__m512; 8],
        sum_coefs: __m512,
    }

    trait SuperBlock {
        const BYTES: usize;
        unsafe fn decode(p: *const u8) -> Decoded;
    }

    /// `(w & 0x000F) | 0x4300` in every 16-bit lane: a nibble as the bf16 `128 + q`.
    #[inline(always)]
    unsafe fn nibble_bf16(w: __m512i) -> __m512i {
        // ternlog 0xEA: (a & b) | c.
        _mm512_ternarylogic_epi32::<0xEA>(w, _mm512_set1_epi16(0x000F), _mm512_set1_epi16(0x4300))
    }

    /// 32 bytes widened to 16-bit lanes.
    #[inline(always)]
    unsafe fn widen32(p: *const u8) -> __m512i {
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(p as *const __m256i))
    }

    struct Q4K;
    impl SuperBlock for Q4K {
        const BYTES: usize = 144;
        #[inline(always)]
        unsafe fn decode(p: *const u8) -> Decoded {
            // d f16, dmin f16, scales 12 bytes (eight 6-bit scales and mins), qs 128 bytes.
            let (d, dmin) = (f16_at_ptr(p), f16_at_ptr(p.add(2)));
            let (sc, mins) = k4_scales(p.add(4), d, dmin);
            let mut coefs = [0.0f32; 16];
            for j in 0..8 {
                // Each 32-element sub-block is two of the sums' 16-element runs.
                let c = -(128.0 * sc[j] + mins[j]);
                coefs[2 * j] = c;
                coefs[2 * j + 1] = c;
            }
            let mut quants = [_mm512_setzero_si512(); 8];
            for pair in 0..4 {
                // Sub-block 2·pair takes the low nibbles of these 32 bytes, 2·pair + 1 the high.
                let w = widen32(p.add(16 + 32 * pair));
                quants[2 * pair] = nibble_bf16(w);
                quants[2 * pair + 1] = nibble_bf16(_mm512_srli_epi16::<4>(w));
            }
            Decoded {
                quants: quants.map(|q| std::mem::transmute::<__m512i, __m512bh>(q)),
                scales: sc.map(|s| _mm512_set1_ps(s)),
                sum_coefs: _mm512_loadu_ps(coefs.as_ptr()),
            }
        }
    }

    struct Q6K;
    impl SuperBlock for Q6K {
        const BYTES: usize = 210;
        #[inline(always)]
        unsafe fn decode(p: *const u8) -> Decoded {
            // ql 128 bytes, qh 64 bytes, scales 16 x i8, d f16; w = d·sc·(q − 32) with
            // q = low nibble | two high bits << 4, sub-blocks of 16.
            let (ql, qh) = (p, p.add(128));
            let d = f16_at_ptr(p.add(208));
            let sc8 = _mm_loadu_si128(p.add(192) as *const __m128i);
            let sc = _mm512_mul_ps(
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)),
                _mm512_set1_ps(d),
            );
            let low4 = _mm512_set1_epi16(0x000F);
            let high2 = _mm512_set1_epi16(0x0030);
            let exponent = _mm512_set1_epi16(0x4300);
            let mut quants = [_mm512_setzero_si512(); 8];
            let mut scales = [_mm512_setzero_ps(); 8];
            for half in 0..2 {
                let (l0, l1) = (widen32(ql.add(64 * half)), widen32(ql.add(64 * half + 32)));
                let h = widen32(qh.add(32 * half));
                // Elements 0..32, 32..64, 64..96, 96..128 of the half: which nibble, and the
                // qh bits moved to bits 4-5.
                let parts = [
                    (l0, _mm512_slli_epi16::<4>(h)),
                    (l1, _mm512_slli_epi16::<2>(h)),
                    (_mm512_srli_epi16::<4>(l0), h),
                    (_mm512_srli_epi16::<4>(l1), _mm512_srli_epi16::<2>(h)),
                ];
                for (g, (low, high)) in parts.into_iter().enumerate() {
                    // (high & 0x30) | 0x4300, then the low nibble's bits from `low`
                    // (ternlog 0xD8: c ? b : a, with c = 0x000F).
                    let top = _mm512_ternarylogic_epi32::<0xEA>(high, high2, exponent);
                    quants[4 * half + g] = _mm512_ternarylogic_epi32::<0xD8>(top, low, low4);
                    // Lanes 0-7 hold elements 0..16 of the 32 (sub-block s), 8-15 the next.
                    let s = (8 * half + 2 * g) as i32;
                    let index = _mm512_set_epi32(
                        s + 1,
                        s + 1,
                        s + 1,
                        s + 1,
                        s + 1,
                        s + 1,
                        s + 1,
                        s + 1,
                        s,
                        s,
                        s,
                        s,
                        s,
                        s,
                        s,
                        s,
                    );
                    scales[4 * half + g] = _mm512_permutexvar_ps(index, sc);
                }
            }
            Decoded {
                quants: quants.map(|q| std::mem::transmute::<__m512i, __m512bh>(q)),
                scales,
                // The zero point 32 and the exponent's 128.
                sum_coefs: _mm512_mul_ps(sc, _mm512_set1_ps(-160.0)),
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx512vl,avx2,fma,f16c")]
    pub unsafe fn run(task: &Task<'_>, acts: &Bf16Activations) {
        match task.matrix.dtype() {
            DType::Q4_K => columns::<Q4K>(task, acts),
            DType::Q6_K => columns::<Q6K>(task, acts),
            other => unreachable!("bf16 decode kernel for {other:?}"),
        }
    }

    #[inline(always)]
    unsafe fn columns<B: SuperBlock>(task: &Task<'_>, acts: &Bf16Activations) {
        let mut c = task.c0;
        while c < task.c1 {
            let cols = COLS.min(task.c1 - c);
            let mut r0 = 0;
            while r0 < task.m {
                let rows = MAX_ROWS.min(task.m - r0);
                macro_rules! shapes {
                    ($(($r:literal, $c:literal)),*) => {
                        match (rows, cols) {
                            $(($r, $c) => kernel::<B, $r, $c>(task, acts, r0, c),)*
                            _ => unreachable!(),
                        }
                    };
                }
                shapes!(
                    (1, 1),
                    (2, 1),
                    (3, 1),
                    (4, 1),
                    (1, 2),
                    (2, 2),
                    (3, 2),
                    (4, 2)
                );
                r0 += rows;
            }
            c += cols;
        }
    }

    /// `MR` x rows from `r0` times `NC` weight rows from `c`, super-block by super-block.
    #[inline(always)]
    unsafe fn kernel<B: SuperBlock, const MR: usize, const NC: usize>(
        task: &Task<'_>,
        acts: &Bf16Activations,
        r0: usize,
        c: usize,
    ) {
        let m = task.matrix;
        let k = m.cols();
        let (bytes, row_bytes) = (m.bytes().as_ptr(), m.row_bytes());
        let x: [*const u16; MR] = std::array::from_fn(|r| acts.rows_from(r0 + r).as_ptr());
        let sums: [*const f32; MR] = std::array::from_fn(|r| acts.sums16_from(r0 + r).as_ptr());
        let mut acc = [[_mm512_setzero_ps(); NC]; MR];
        for b in 0..k / 256 {
            for j in 0..NC {
                let block = bytes.add((c + j) * row_bytes + b * B::BYTES);
                prefetch_lines::<TO_L1>(block.wrapping_add(2 * NC * row_bytes), B::BYTES);
                let w = B::decode(block);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let xb = x[r].add(b * 256);
                    for v in 0..8 {
                        let xv: __m512bh = std::mem::transmute(_mm512_loadu_si512(
                            xb.add(32 * v) as *const __m512i
                        ));
                        let dot = _mm512_dpbf16_ps(_mm512_setzero_ps(), w.quants[v], xv);
                        acc[j] = _mm512_fmadd_ps(dot, w.scales[v], acc[j]);
                    }
                    let s = _mm512_loadu_ps(sums[r].add(b * 16));
                    acc[j] = _mm512_fmadd_ps(w.sum_coefs, s, acc[j]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (j, &v) in acc.iter().enumerate() {
                task.out.write(r0 + r, c + j, _mm512_reduce_add_ps(v));
            }
        }
    }
}

#[cfg(test)]
mod tests;
