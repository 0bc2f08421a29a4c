//! The canonical f32 reductions every kernel uses, with an AVX2+FMA path picked at run time and
//! a portable path that computes bit-for-bit the same thing.
//!
//! Canonical dot product of length k: eight lanes; lane j accumulates `a[i] * b[i]` (fused
//! multiply-add) for every i ≡ j (mod 8), in increasing i; then the lanes are summed as
//! `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`. The order depends only on k, never on how many
//! rows or columns are computed together, which is what makes the matmuls batch-invariant.

pub const LANES: usize = 8;
/// Rows of `x` and columns of the weight panel one micro-kernel call computes at most.
pub const TILE_ROWS: usize = 4;
pub const TILE_COLS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Avx2Fma,
    Portable,
}

/// The instruction set the kernels use on this machine.
pub fn detected_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Isa::Avx2Fma;
        }
    }
    Isa::Portable
}

#[inline(always)]
fn horizontal_sum(l: &[f32; LANES]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

/// A block of dot products: `dot(x row r, w row c)` for
/// `r < rows <= TILE_ROWS`, `c < cols <= TILE_COLS`, each of length `k`.
pub struct Tile<'a> {
    pub x: &'a [f32],
    pub x_stride: usize,
    pub rows: usize,
    pub w: &'a [f32],
    pub w_stride: usize,
    pub cols: usize,
    pub k: usize,
}

impl Tile<'_> {
    fn in_bounds(&self) -> bool {
        self.rows <= TILE_ROWS
            && self.cols <= TILE_COLS
            && (self.rows <= 1 || self.x_stride >= self.k)
            && (self.cols <= 1 || self.w_stride >= self.k)
            && (self.rows == 0 || self.x.len() >= (self.rows - 1) * self.x_stride + self.k)
            && (self.cols == 0 || self.w.len() >= (self.cols - 1) * self.w_stride + self.k)
    }

    /// The tile's dot products, `sums[r][c]` (entries past `rows`/`cols` are zero).
    pub fn compute(&self, isa: Isa) -> [[f32; TILE_COLS]; TILE_ROWS] {
        assert!(self.in_bounds(), "dot tile out of bounds");
        let mut sums = [[0.0f32; TILE_COLS]; TILE_ROWS];
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2Fma is only returned when the CPU has AVX2 and FMA; bounds checked above.
            Isa::Avx2Fma => unsafe { avx2::tile_dispatch(self, &mut sums) },
            _ => self.portable(&mut sums),
        }
        sums
    }

    fn portable(&self, sums: &mut [[f32; TILE_COLS]; TILE_ROWS]) {
        for r in 0..self.rows {
            let x = &self.x[r * self.x_stride..r * self.x_stride + self.k];
            for c in 0..self.cols {
                let w = &self.w[c * self.w_stride..c * self.w_stride + self.k];
                sums[r][c] = dot_portable(x, w);
            }
        }
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        lanes[i % LANES] = x.mul_add(*y, lanes[i % LANES]);
    }
    horizontal_sum(&lanes)
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
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Avx2Fma is only returned when the CPU has AVX2 and FMA.
        Isa::Avx2Fma => unsafe { avx2::axpy(alpha, v, acc) },
        _ => {
            for (a, x) in acc.iter_mut().zip(v) {
                *a = alpha.mul_add(*x, *a);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{horizontal_sum, Tile, LANES, TILE_COLS, TILE_ROWS};
    use std::arch::x86_64::*;

    /// Picks the const-generic kernel for the tile's shape.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn tile_dispatch(t: &Tile<'_>, sums: &mut [[f32; TILE_COLS]; TILE_ROWS]) {
        match (t.rows, t.cols) {
            (4, 2) => tile::<4, 2>(t, sums),
            (3, 2) => tile::<3, 2>(t, sums),
            (2, 2) => tile::<2, 2>(t, sums),
            (1, 2) => tile::<1, 2>(t, sums),
            (4, 1) => tile::<4, 1>(t, sums),
            (3, 1) => tile::<3, 1>(t, sums),
            (2, 1) => tile::<2, 1>(t, sums),
            (1, 1) => tile::<1, 1>(t, sums),
            _ => {}
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const MR: usize, const NR: usize>(
        t: &Tile<'_>,
        sums: &mut [[f32; TILE_COLS]; TILE_ROWS],
    ) {
        let vec_k = t.k / LANES * LANES;
        let x = t.x.as_ptr();
        let w = t.w.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); NR]; MR];
        let mut i = 0;
        while i < vec_k {
            let mut wv = [_mm256_setzero_ps(); NR];
            for c in 0..NR {
                wv[c] = _mm256_loadu_ps(w.add(c * t.w_stride + i));
            }
            for r in 0..MR {
                let xv = _mm256_loadu_ps(x.add(r * t.x_stride + i));
                for c in 0..NR {
                    acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
                }
            }
            i += LANES;
        }
        for r in 0..MR {
            for c in 0..NR {
                let mut lanes = [0.0f32; LANES];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][c]);
                // The tail continues each lane's own sequence, exactly as the portable loop does.
                for j in vec_k..t.k {
                    let (xj, wj) = (*x.add(r * t.x_stride + j), *w.add(c * t.w_stride + j));
                    lanes[j - vec_k] = xj.mul_add(wj, lanes[j - vec_k]);
                }
                sums[r][c] = horizontal_sum(&lanes);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(alpha: f32, v: &[f32], acc: &mut [f32]) {
        let n = v.len().min(acc.len());
        let vec_n = n / LANES * LANES;
        let a = _mm256_set1_ps(alpha);
        let mut i = 0;
        while i < vec_n {
            let p = acc.as_mut_ptr().add(i);
            _mm256_storeu_ps(
                p,
                _mm256_fmadd_ps(a, _mm256_loadu_ps(v.as_ptr().add(i)), _mm256_loadu_ps(p)),
            );
            i += LANES;
        }
        for j in vec_n..n {
            acc[j] = alpha.mul_add(v[j], acc[j]);
        }
    }
}
