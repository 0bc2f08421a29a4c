//! The canonical f32 dot product every kernel computes, the instruction sets that compute it,
//! and the f32 micro-kernel (a tile of dot products).
//!
//! Canonical dot product of length k: sixteen lanes; lane j accumulates `a[i] * b[i]` (fused
//! multiply-add) for every i ≡ j (mod 16), in increasing i; then the lanes are summed as
//! [`reduce_lanes`] says. The order depends only on k, never on how many rows or columns are
//! computed together nor on the instruction set (AVX-512 holds the lanes in one register, AVX2
//! in two, the portable code in an array), which is what makes the matmuls batch-invariant and
//! every ISA give the same bits.

#[cfg(target_arch = "x86_64")]
pub(crate) mod vec16;

pub const LANES: usize = 16;
/// Largest tile [`Tile::compute`] accepts.
pub const MAX_TILE_ROWS: usize = 6;
pub const MAX_TILE_COLS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 F/BW/DQ/VL with FMA and F16C.
    Avx512,
    /// AVX2 with FMA and F16C.
    Avx2Fma,
    Portable,
}

/// The best instruction set this machine has.
pub fn detected_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        let base = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        let avx512 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl");
        if base && avx512 {
            return Isa::Avx512;
        }
        if base {
            return Isa::Avx2Fma;
        }
    }
    Isa::Portable
}

/// Every ISA this machine can run, best first (for tests that compare them).
pub fn available_isas() -> Vec<Isa> {
    match detected_isa() {
        Isa::Avx512 => vec![Isa::Avx512, Isa::Avx2Fma, Isa::Portable],
        Isa::Avx2Fma => vec![Isa::Avx2Fma, Isa::Portable],
        Isa::Portable => vec![Isa::Portable],
    }
}

/// Where a prefetch brings its lines: `_mm_prefetch`'s hints, named.
#[cfg(target_arch = "x86_64")]
pub(crate) const TO_L1: i32 = std::arch::x86_64::_MM_HINT_T0;
#[cfg(target_arch = "x86_64")]
pub(crate) const TO_L2: i32 = std::arch::x86_64::_MM_HINT_T1;

/// Asks for every cache line of `bytes` bytes at `p`, into the cache level `LEVEL` names. The
/// fused kernels call it on the block two groups of weight rows ahead of the one they decode:
/// that is where the stream goes next, and weights are read once per step, from memory rather
/// than cache. Which level is best depends on how long a kernel works on each byte: a kernel
/// that decodes slowly wants the lines in L1, one that streams fast (the int8 path, 8-bit
/// weights) keeps L1's few miss buffers free by stopping them in L2 (Zen 4, measured: see
/// `BlockFormat::PREFETCH_TO_L2` and `int8_gemm`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn prefetch_lines<const LEVEL: i32>(p: *const u8, bytes: usize) {
    use std::arch::x86_64::_mm_prefetch;
    let mut line = 0;
    while line < bytes {
        _mm_prefetch::<LEVEL>(p.wrapping_add(line) as *const i8);
        line += 64;
    }
}

/// The canonical sum of sixteen lane accumulators:
/// `s8[j] = l[j] + l[j+8]`, `s4[j] = s8[j] + s8[j+4]`, `s2[j] = s4[j] + s4[j+2]`, `s2[0] + s2[1]`.
#[inline(always)]
pub fn reduce_lanes(l: &[f32; LANES]) -> f32 {
    let mut s8 = [0.0f32; 8];
    for j in 0..8 {
        s8[j] = l[j] + l[j + 8];
    }
    let s4 = [s8[0] + s8[4], s8[1] + s8[5], s8[2] + s8[6], s8[3] + s8[7]];
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

/// Continues lane accumulators over `a[from..]`, `b[from..]` (lane = index mod 16).
#[inline(always)]
pub fn accumulate_tail(lanes: &mut [f32; LANES], a: &[f32], b: &[f32], from: usize) {
    for i in from..a.len().min(b.len()) {
        lanes[i % LANES] = a[i].mul_add(b[i], lanes[i % LANES]);
    }
}

pub fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    accumulate_tail(&mut lanes, a, b, 0);
    reduce_lanes(&lanes)
}

/// A block of dot products: `dot(x row r, w row c)` for
/// `r < rows <= MAX_TILE_ROWS`, `c < cols <= MAX_TILE_COLS`, each of length `k`.
pub struct Tile<'a> {
    pub x: &'a [f32],
    pub x_stride: usize,
    pub rows: usize,
    pub w: &'a [f32],
    pub w_stride: usize,
    pub cols: usize,
    pub k: usize,
}

pub type TileSums = [[f32; MAX_TILE_COLS]; MAX_TILE_ROWS];

impl Tile<'_> {
    fn in_bounds(&self) -> bool {
        self.rows <= MAX_TILE_ROWS
            && self.cols <= MAX_TILE_COLS
            && (self.rows <= 1 || self.x_stride >= self.k)
            && (self.cols <= 1 || self.w_stride >= self.k)
            && (self.rows == 0 || self.x.len() >= (self.rows - 1) * self.x_stride + self.k)
            && (self.cols == 0 || self.w.len() >= (self.cols - 1) * self.w_stride + self.k)
    }

    /// The tile's dot products, `sums[r][c]` (entries past `rows`/`cols` are zero).
    pub fn compute(&self, isa: Isa) -> TileSums {
        assert!(self.in_bounds(), "dot tile out of bounds");
        let mut sums = [[0.0f32; MAX_TILE_COLS]; MAX_TILE_ROWS];
        match isa {
            // SAFETY: these ISAs are only used when detected; bounds checked above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { x86::tile_avx512(self, &mut sums) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { x86::tile_avx2(self, &mut sums) },
            _ => self.portable(&mut sums),
        }
        sums
    }

    fn portable(&self, sums: &mut TileSums) {
        for (r, row) in sums.iter_mut().enumerate().take(self.rows) {
            let x = &self.x[r * self.x_stride..r * self.x_stride + self.k];
            for (c, sum) in row.iter_mut().enumerate().take(self.cols) {
                let w = &self.w[c * self.w_stride..c * self.w_stride + self.k];
                *sum = dot_portable(x, w);
            }
        }
    }
}

/// The canonical dot product of `a` and `b` (equal lengths).
pub fn dot(isa: Isa, a: &[f32], b: &[f32]) -> f32 {
    let k = a.len().min(b.len());
    let tile = Tile {
        x: a,
        x_stride: k,
        rows: 1,
        w: b,
        w_stride: k,
        cols: 1,
        k,
    };
    tile.compute(isa)[0][0]
}

/// `acc[i] = fma(alpha, v[i], acc[i])` for every i: the weighted-sum step of attention.
pub fn axpy(isa: Isa, alpha: f32, v: &[f32], acc: &mut [f32]) {
    match isa {
        // SAFETY: only used when detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2Fma => unsafe { x86::axpy_avx2(alpha, v, acc) },
        _ => {
            for (a, x) in acc.iter_mut().zip(v) {
                *a = alpha.mul_add(*x, *a);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{accumulate_tail, reduce_lanes, Tile, TileSums, LANES};
    use crate::simd::vec16::{Avx2, Avx512, Vec16};
    use std::arch::x86_64::*;

    /// One tile of `MR x NR` dot products over the full `k` (rows and columns within bounds).
    #[inline(always)]
    pub unsafe fn tile_kernel<S: Vec16, const MR: usize, const NR: usize>(
        t: &Tile<'_>,
        sums: &mut TileSums,
    ) {
        let vec_k = t.k / LANES * LANES;
        let (x, w) = (t.x.as_ptr(), t.w.as_ptr());
        let mut acc = [[S::zero(); NR]; MR];
        let mut i = 0;
        while i < vec_k {
            let mut wv = [S::zero(); NR];
            for (c, wv) in wv.iter_mut().enumerate() {
                *wv = S::load(w.add(c * t.w_stride + i));
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let xv = S::load(x.add(r * t.x_stride + i));
                for c in 0..NR {
                    acc[c] = S::fma(xv, wv[c], acc[c]);
                }
            }
            i += LANES;
        }
        for r in 0..MR {
            for c in 0..NR {
                sums[r][c] = if vec_k == t.k {
                    S::reduce(acc[r][c])
                } else {
                    // The tail continues each lane's own sequence, as the portable loop does.
                    let mut lanes = [0.0f32; LANES];
                    S::store(lanes.as_mut_ptr(), acc[r][c]);
                    let xr = &t.x[r * t.x_stride..r * t.x_stride + t.k];
                    let wc = &t.w[c * t.w_stride..c * t.w_stride + t.k];
                    accumulate_tail(&mut lanes, xr, wc, vec_k);
                    reduce_lanes(&lanes)
                };
            }
        }
    }

    /// Picks the const-generic kernel for the tile's shape.
    #[inline(always)]
    pub unsafe fn tile_dispatch<S: Vec16>(t: &Tile<'_>, sums: &mut TileSums) {
        macro_rules! shapes {
            ($(($r:literal, $c:literal)),*) => {
                match (t.rows, t.cols) {
                    $(($r, $c) => tile_kernel::<S, $r, $c>(t, sums),)*
                    _ => unreachable!("tile shape out of bounds (checked by Tile::compute)"),
                }
            };
        }
        shapes!(
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
            (2, 1),
            (2, 2),
            (2, 3),
            (2, 4),
            (3, 1),
            (3, 2),
            (3, 3),
            (3, 4),
            (4, 1),
            (4, 2),
            (4, 3),
            (4, 4),
            (5, 1),
            (5, 2),
            (5, 3),
            (5, 4),
            (6, 1),
            (6, 2),
            (6, 3),
            (6, 4)
        );
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub unsafe fn tile_avx512(t: &Tile<'_>, sums: &mut TileSums) {
        tile_dispatch::<Avx512>(t, sums)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn tile_avx2(t: &Tile<'_>, sums: &mut TileSums) {
        tile_dispatch::<Avx2>(t, sums)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy_avx2(alpha: f32, v: &[f32], acc: &mut [f32]) {
        let n = v.len().min(acc.len());
        let vec_n = n / 8 * 8;
        let a = _mm256_set1_ps(alpha);
        let mut i = 0;
        while i < vec_n {
            let p = acc.as_mut_ptr().add(i);
            _mm256_storeu_ps(
                p,
                _mm256_fmadd_ps(a, _mm256_loadu_ps(v.as_ptr().add(i)), _mm256_loadu_ps(p)),
            );
            i += 8;
        }
        for j in vec_n..n {
            acc[j] = alpha.mul_add(v[j], acc[j]);
        }
    }
}
