//! The opt-in int8 path of `y = x · Wᵀ` for Q4_K and Q6_K weights: x quantized to int8 per
//! 256-element block (`q8_activations`), the weights' own small integers multiplied into it
//! with integer dot products (AVX-512 VNNI), one f32 scaling per block.
//!
//! The dot product of a weight row and an activation row is defined by the portable code
//! below, and the SIMD tiles give its bits: eight i32 lanes, lane `u` summing, over the
//! block's sub-blocks, `scale · Σ q_w · q_x` of elements `4u..4u + 4` of every 32; per block,
//! the lanes become f32 through `lane += (dx · d) · int_lane` (fused), the offsets likewise;
//! the eight f32 lanes are summed as `reduce8` at the end. Integer sums are exact and the
//! float steps depend only on the row and the block, so a row's result is the same whatever
//! else is in the batch (batch invariance holds on this path as on the f32 one).

use ferrite_model::quant::q4_k::scale_min_k4;
use ferrite_model::weights::DType;

pub use super::int8_support::{available, supports};
use super::q8_activations::{Q8Activations, BLOCK};
use super::qgemm::Task;
use crate::simd::Isa;

/// Columns `c0..c1` of the task's output from its int8 activations.
pub fn run(isa: Isa, task: &Task<'_>, acts: &Q8Activations) {
    assert_eq!(
        acts.k(),
        task.matrix.cols(),
        "int8 activations of another width"
    );
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && available() {
        // SAFETY: the features were detected just above.
        unsafe { x86::run(task, acts) };
        return;
    }
    let _ = isa;
    let (bytes, row_bytes) = (task.matrix.bytes(), task.matrix.row_bytes());
    for c in task.c0..task.c1 {
        let row = &bytes[c * row_bytes..(c + 1) * row_bytes];
        for r in 0..task.m {
            let v = dot_portable(task.matrix.dtype(), row, acts, r);
            // SAFETY: columns c0..c1 belong to this task.
            unsafe { task.out.write(r, c, v) };
        }
    }
}

/// The int8 dot product of a Q4_K or Q6_K weight row with activation row `r`.
pub fn dot_portable(dtype: DType, row: &[u8], acts: &Q8Activations, r: usize) -> f32 {
    let mut lanes = [0.0f32; 8];
    for b in 0..acts.k() / BLOCK {
        match dtype {
            DType::Q4_K => q4k_block(&row[b * 144..(b + 1) * 144], acts, r, b, &mut lanes),
            DType::Q6_K => q6k_block(&row[b * 210..(b + 1) * 210], acts, r, b, &mut lanes),
            other => panic!("int8 path: {other:?} has no integer kernel"),
        }
    }
    reduce8(&lanes)
}

/// `s4[j] = l[j] + l[j+4]`, `s2[j] = s4[j] + s4[j+2]`, `s2[0] + s2[1]`.
fn reduce8(l: &[f32; 8]) -> f32 {
    let s4 = [l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]];
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_K's eight 6-bit scales and mins, unpacked by GGML's reference code.
fn q4k_scales_mins(s: &[u8]) -> ([i32; 8], [i32; 8]) {
    let unpacked: [(u8, u8); 8] = std::array::from_fn(|j| scale_min_k4(j, s));
    (
        unpacked.map(|(sc, _)| sc as i32),
        unpacked.map(|(_, m)| m as i32),
    )
}

/// Lane `u` of 32 products: `Σ_{e in 4u..4u+4} w[e] · x[e]`.
fn lane_sums(w: impl Fn(usize) -> i32, x: &[i8]) -> [i32; 8] {
    std::array::from_fn(|u| (4 * u..4 * u + 4).map(|e| w(e) * x[e] as i32).sum())
}

fn q4k_block(blk: &[u8], acts: &Q8Activations, r: usize, b: usize, lanes: &mut [f32; 8]) {
    let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
    let (sc, m) = q4k_scales_mins(&blk[4..16]);
    let (qs, x) = (&blk[16..144], acts.q(r, b));
    let mut acc = [0i32; 8];
    for s in 0..8 {
        // Sub-block s: the low nibbles of bytes 32·(s/2).. for even s, the high for odd.
        let bytes = &qs[32 * (s / 2)..32 * (s / 2) + 32];
        let nibble = |e: usize| {
            (if s % 2 == 0 {
                bytes[e] & 15
            } else {
                bytes[e] >> 4
            }) as i32
        };
        let sums = lane_sums(nibble, &x[32 * s..32 * s + 32]);
        for u in 0..8 {
            acc[u] += sc[s] * sums[u];
        }
    }
    let sums32 = acts.sums32(r, b);
    let mut mins = [0i32; 8];
    for v in 0..4 {
        mins[v] = m[2 * v] * sums32[2 * v] as i32 + m[2 * v + 1] * sums32[2 * v + 1] as i32;
    }
    let dx = acts.d(r, b);
    let (scale, min_scale) = (dx * d, dx * dmin);
    for u in 0..8 {
        lanes[u] = (acc[u] as f32).mul_add(scale, lanes[u]);
        lanes[u] = (-(mins[u] as f32)).mul_add(min_scale, lanes[u]);
    }
}

fn q6k_block(blk: &[u8], acts: &Q8Activations, r: usize, b: usize, lanes: &mut [f32; 8]) {
    let d = f16_at(blk, 208);
    let sc: [i32; 16] = std::array::from_fn(|i| blk[192 + i] as i8 as i32);
    let x = acts.q(r, b);
    let mut acc = [0i32; 8];
    for half in 0..2 {
        let (ql, qh) = (
            &blk[64 * half..64 * half + 64],
            &blk[128 + 32 * half..160 + 32 * half],
        );
        for g in 0..4 {
            // 32 elements from 128·half + 32·g: a nibble of ql, two bits of qh (stored 0..64,
            // the -32 is applied through the sums below).
            let src = &ql[32 * (g % 2)..32 * (g % 2) + 32];
            let q6 = |e: usize| {
                let nibble = if g < 2 { src[e] & 15 } else { src[e] >> 4 };
                (nibble | (((qh[e] >> (2 * g)) & 3) << 4)) as i32
            };
            let start = 128 * half + 32 * g;
            let sums = lane_sums(q6, &x[start..start + 32]);
            let sub = 8 * half + 2 * g;
            for u in 0..8 {
                acc[u] += sc[sub + u / 4] * sums[u];
            }
        }
    }
    let sums16 = acts.sums16(r, b);
    let scale = acts.d(r, b) * d;
    for u in 0..8 {
        let offset = sc[2 * u] * sums16[2 * u] as i32 + sc[2 * u + 1] * sums16[2 * u + 1] as i32;
        lanes[u] = ((acc[u] - 32 * offset) as f32).mul_add(scale, lanes[u]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
