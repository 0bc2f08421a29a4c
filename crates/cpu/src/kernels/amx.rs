//! Intel AMX tiles for bf16 products: `C[16×16 f32] += A[16×32 bf16] · B[32×16 bf16]` per
//! `tdpbf16ps`, 8,192 multiply-adds in one instruction (AVX-512's FMA does 16).
//!
//! Each element of C is one x row against one weight row, accumulated over k in order: the
//! 32-element steps of the caller's loop, and within a step the 16 pairs in order (Intel's
//! definition of `tdpbf16ps`). So an element's bits depend on its two rows and k only, never on
//! which other rows share the tile: the bf16 path stays batch-invariant.
//!
//! The instructions are emitted with `asm!` (Rust's AMX intrinsics are not stable). Linux hands
//! a process AMX state only on request (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), made once by
//! [`available`]; the tile configuration is per thread, loaded at the start of every product.

#[cfg(target_arch = "x86_64")]
use std::arch::asm;
use std::sync::OnceLock;

/// Rows of a tile, and columns of C (weight rows per tile).
pub const TILE_ROWS: usize = 16;
/// bf16 elements of k per step: one 64-byte tile row.
pub const TILE_K: usize = 32;

/// Whether this machine and kernel let the process use AMX bf16 tiles.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            // CPUID.(7,0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
            let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
            if edx & (1 << 22) == 0 || edx & (1 << 24) == 0 {
                return false;
            }
            request_tile_data()
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        false
    })
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: whether Linux granted the tile data
/// state to this process (all its threads).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request_tile_data() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: a system call that only changes this process's permitted register state.
    unsafe {
        asm!("syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _, lateout("r11") _,
            options(nostack));
    }
    ret == 0
}

/// The tile configuration (`ldtilecfg`'s 64-byte operand, palette 1): tmm0..3 the four C
/// tiles, tmm4..5 two A tiles (x rows), tmm6..7 two B tiles (weight rows), every one 16 rows
/// of 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    bytes_per_row: [u16; 16],
    rows: [u8; 16],
}

/// Loads the configuration on this thread.
///
/// SAFETY: [`available`] returned true.
#[cfg(target_arch = "x86_64")]
pub unsafe fn configure() {
    let mut config = TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        bytes_per_row: [0; 16],
        rows: [0; 16],
    };
    for t in 0..8 {
        config.bytes_per_row[t] = 64;
        config.rows[t] = TILE_ROWS as u8;
    }
    asm!("ldtilecfg [{0}]", in(reg) &config as *const TileConfig, options(nostack, readonly));
}

/// Releases the tile state (lets the kernel skip saving it on a context switch).
///
/// SAFETY: [`available`] returned true.
#[cfg(target_arch = "x86_64")]
pub unsafe fn release() {
    asm!("tilerelease", options(nostack, nomem));
}

/// Up to 2×2 C tiles: x rows `16·i..` of `a` (bf16, `a_stride` elements a row) for `i <
/// a_tiles`, times the panel's weight-row groups `b[j]` for `j < b_tiles` (each `k / 2` rows of
/// 16 pairs: [`pack_pairs`]'s layout), over `k` (a multiple of [`TILE_K`]). `c[2·i + j]` gets
/// the 16×16 sums, row-major.
///
/// SAFETY: [`configure`] ran on this thread; `a` holds `16 · a_tiles` rows of `a_stride ≥ k`
/// elements and every `b[j]` `8 · k` elements.
#[cfg(target_arch = "x86_64")]
pub unsafe fn product(
    a: *const u16,
    a_stride: usize,
    a_tiles: usize,
    b: [*const u16; 2],
    b_tiles: usize,
    k: usize,
    c: &mut [[f32; TILE_ROWS * TILE_ROWS]; 4],
) {
    let a_bytes = a_stride * 2;
    let a1 = a.add(TILE_ROWS * a_stride);
    asm!(
        "tilezero tmm0",
        "tilezero tmm1",
        "tilezero tmm2",
        "tilezero tmm3",
        options(nostack, nomem)
    );
    for s in 0..k / TILE_K {
        // B rows: pairs 16·s..16·s + 16, 16 weight rows × 2 bf16 (64 bytes) each.
        let (b0, b1) = (b[0].add(s * 512), b[1].add(s * 512));
        asm!("tileloadd tmm4, [{p} + {stride}*1]", p = in(reg) a.add(s * TILE_K),
            stride = in(reg) a_bytes, options(nostack, readonly));
        asm!("tileloadd tmm6, [{p} + {stride}*1]", p = in(reg) b0, stride = in(reg) 64usize,
            options(nostack, readonly));
        asm!("tdpbf16ps tmm0, tmm4, tmm6", options(nostack, nomem));
        if b_tiles == 2 {
            asm!("tileloadd tmm7, [{p} + {stride}*1]", p = in(reg) b1, stride = in(reg) 64usize,
                options(nostack, readonly));
            asm!("tdpbf16ps tmm1, tmm4, tmm7", options(nostack, nomem));
        }
        if a_tiles == 2 {
            asm!("tileloadd tmm5, [{p} + {stride}*1]", p = in(reg) a1.add(s * TILE_K),
                stride = in(reg) a_bytes, options(nostack, readonly));
            asm!("tdpbf16ps tmm2, tmm5, tmm6", options(nostack, nomem));
            if b_tiles == 2 {
                asm!("tdpbf16ps tmm3, tmm5, tmm7", options(nostack, nomem));
            }
        }
    }
    let stride = 64usize;
    asm!("tilestored [{p} + {stride}*1], tmm0", p = in(reg) c[0].as_mut_ptr(),
        stride = in(reg) stride, options(nostack));
    asm!("tilestored [{p} + {stride}*1], tmm1", p = in(reg) c[1].as_mut_ptr(),
        stride = in(reg) stride, options(nostack));
    asm!("tilestored [{p} + {stride}*1], tmm2", p = in(reg) c[2].as_mut_ptr(),
        stride = in(reg) stride, options(nostack));
    asm!("tilestored [{p} + {stride}*1], tmm3", p = in(reg) c[3].as_mut_ptr(),
        stride = in(reg) stride, options(nostack));
}

/// `v` rounded to bf16, nearest with ties to even (NaN stays a NaN).
#[inline(always)]
pub fn to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// `bf16` widened to f32 (exact).
#[cfg(test)]
pub fn from_bf16(v: u16) -> f32 {
    f32::from_bits((v as u32) << 16)
}

/// 16 weight rows (`rows[n]`, f32, `k` long; missing rows are zeros) as a B operand: for each
/// pair `p` of k, the 16 rows' elements `2p, 2p + 1` side by side (`out[(16·p + n)·2 + e]`).
pub fn pack_pairs(rows: &[&[f32]], k: usize, out: &mut [u16]) {
    assert!(rows.len() <= TILE_ROWS && out.len() >= TILE_ROWS * k);
    for p in 0..k / 2 {
        let dst = &mut out[32 * p..32 * p + 32];
        for n in 0..TILE_ROWS {
            let (lo, hi) = match rows.get(n) {
                Some(row) => (to_bf16(row[2 * p]), to_bf16(row[2 * p + 1])),
                None => (0, 0),
            };
            dst[2 * n] = lo;
            dst[2 * n + 1] = hi;
        }
    }
}

/// [`pack_pairs`] for 16 whole rows, with AVX-512: per step of 32 elements, each row's 32
/// values rounded (the same integer rounding as [`to_bf16`]) into 16 pairs, and the 16×16 pairs
/// transposed in registers.
///
/// SAFETY: AVX-512 F/BW is available; `rows` holds 16 rows of `k` (a multiple of 32) at stride
/// `k`, `out` 16·k elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn pack_pairs_avx512(rows: &[f32], k: usize, out: &mut [u16]) {
    use std::arch::x86_64::*;
    assert!(rows.len() >= TILE_ROWS * k && out.len() >= TILE_ROWS * k);
    assert!(k.is_multiple_of(TILE_K));
    // The high 16 bits of each f32 lane of a (u16 lanes 0..16) then of b (16..32).
    let high_halves: [i16; 32] = std::array::from_fn(|j| (2 * (j % 16) + 1 + 32 * (j / 16)) as i16);
    let high_halves = _mm512_loadu_si512(high_halves.as_ptr() as *const _);
    let round = |v: __m512| {
        let bits = _mm512_castps_si512(v);
        let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
        let rounded = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd);
        // NaN: keep it a quiet NaN whatever the carry does.
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x0040_0000))
    };
    let src = rows.as_ptr();
    let dst = out.as_mut_ptr();
    for step in 0..k / TILE_K {
        let mut r = [_mm512_setzero_si512(); 16];
        for (n, r) in r.iter_mut().enumerate() {
            let p = src.add(n * k + step * TILE_K);
            let (a, b) = (round(_mm512_loadu_ps(p)), round(_mm512_loadu_ps(p.add(16))));
            *r = _mm512_permutex2var_epi16(a, high_halves, b);
        }
        // r[n] lane p = pair p of row n; transposed: t[p] lane n.
        let mut t = [_mm512_setzero_si512(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for i in 0..4 {
            r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
            r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        for h in 0..2 {
            for j in 0..4 {
                t[8 * h + j] = _mm512_shuffle_i32x4::<0x88>(r[8 * h + j], r[8 * h + j + 4]);
                t[8 * h + j + 4] = _mm512_shuffle_i32x4::<0xdd>(r[8 * h + j], r[8 * h + j + 4]);
            }
        }
        for j in 0..8 {
            r[j] = _mm512_shuffle_i32x4::<0x88>(t[j], t[j + 8]);
            r[j + 8] = _mm512_shuffle_i32x4::<0xdd>(t[j], t[j + 8]);
        }
        for (p, v) in r.iter().enumerate() {
            _mm512_storeu_si512(dst.add((16 * step + p) * 32) as *mut _, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_simd_packing_equals_the_scalar_one() {
        if !is_x86_feature_detected!("avx512bw") {
            return;
        }
        let k = 96;
        let mut rows: Vec<f32> = (0..TILE_ROWS * k)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.0137 + (i as f32) * 1e-6)
            .collect();
        rows[5] = f32::NAN;
        rows[40] = f32::INFINITY;
        rows[41] = 1.0 + 1.0 / 256.0;
        let views: Vec<&[f32]> = rows.chunks_exact(k).collect();
        let mut scalar = vec![0u16; TILE_ROWS * k];
        pack_pairs(&views, k, &mut scalar);
        let mut simd = vec![0u16; TILE_ROWS * k];
        // SAFETY: the feature was detected above; the sizes are whole.
        unsafe { pack_pairs_avx512(&rows, k, &mut simd) };
        assert_eq!(simd, scalar);
    }

    #[test]
    fn bf16_rounding_is_to_nearest_even() {
        for v in [
            1.0f32,
            -2.5,
            3.140625,
            1.0 + 1.0 / 256.0,
            1.0 + 3.0 / 256.0,
            65504.0,
        ] {
            assert_eq!(to_bf16(v), half::bf16::from_f32(v).to_bits(), "{v}");
        }
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    }
}
