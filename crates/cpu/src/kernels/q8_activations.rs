//! Activations quantized to int8 for the opt-in int8 matmul path (`int8_gemm`).
//!
//! Each row of x is cut into blocks of 256 (the K-quants' super-block): a block keeps one f32
//! scale `d = max|x| / 127` and the integers `q = round(x / d)` (ties to even) in -127..=127,
//! plus the sums of its q over every 16 and every 32 elements, which the K-quants' offsets
//! (Q6_K's -32, Q4_K's mins) multiply. A weight block's dot product with it is then exact
//! integer arithmetic and one f32 scaling per block (`int8_gemm`), the way llama.cpp's
//! `vec_dot_q4_K_q8_K` works. This is lossy: x loses the bits below `d` (about 2⁻⁸ of the
//! block's largest value), so the path changes answers and is opt-in.

/// Elements per activation block (a K-quant super-block).
pub const BLOCK: usize = 256;

/// `v` rounded to the nearest integer (ties to even), clamped to -127..=127, as an i8 (NaN ->
/// 0): after the clamp, adding 1.5·2²³ rounds away the fraction and leaves the integer in the
/// float's low bits, whose low byte is the i8 (two's complement). Float arithmetic and a bit
/// cast, which the compiler vectorizes (`round_ties_even` is a libm call on the baseline
/// x86-64 target, and `as i8` a saturating conversion).
#[inline(always)]
fn round_to_i8(v: f32) -> i8 {
    const MAGIC: f32 = 12_582_912.0;
    (v.clamp(-127.0, 127.0) + MAGIC).to_bits() as i8
}

/// `x` (`[m, k]`, k a multiple of [`BLOCK`]) quantized block by block.
#[derive(Debug, Default)]
pub struct Q8Activations {
    k: usize,
    q: Vec<i8>,
    d: Vec<f32>,
    sums16: Vec<i16>,
    sums32: Vec<i16>,
}

impl Q8Activations {
    /// Quantizes the `m` rows of `x` into `self`, reusing its buffers.
    pub fn quantize(&mut self, x: &[f32], m: usize, k: usize) {
        assert!(
            k.is_multiple_of(BLOCK),
            "int8 activations: k = {k} is not a multiple of 256"
        );
        assert!(
            x.len() >= m * k,
            "int8 activations: x is shorter than m * k"
        );
        self.k = k;
        self.q.resize(m * k, 0);
        self.d.resize(m * k / BLOCK, 0.0);
        self.sums16.resize(m * k / 16, 0);
        self.sums32.resize(m * k / 32, 0);
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
            // SAFETY: the features were detected just above.
            unsafe { self.blocks_avx512(&x[..m * k]) };
            return;
        }
        self.blocks(&x[..m * k]);
    }

    /// [`Self::blocks`] compiled for AVX-512, where the compiler vectorizes its loops (the
    /// baseline x86-64 target has no unsigned 32-bit max, and this runs many times slower
    /// there: docs/performance.md, 'Measurements formerly in source comments').
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx2")]
    unsafe fn blocks_avx512(&mut self, x: &[f32]) {
        self.blocks(x)
    }

    /// Quantizes the blocks of `x` into the buffers, sized by `quantize`.
    #[inline(always)]
    fn blocks(&mut self, x: &[f32]) {
        for (b, block) in x.chunks_exact(BLOCK).enumerate() {
            // The largest |x| as the largest bit pattern with the sign cleared (positive floats
            // order as their bits), NaNs skipped: an integer max, which vectorizes where a
            // float max reduction does not.
            let mut lanes = [0u32; 16];
            for sixteen in block.chunks_exact(16) {
                for (lane, v) in lanes.iter_mut().zip(sixteen) {
                    let bits = v.to_bits() & 0x7fff_ffff;
                    *lane = (*lane).max(if bits > f32::INFINITY.to_bits() {
                        0
                    } else {
                        bits
                    });
                }
            }
            let amax_bits = lanes.into_iter().fold(0, u32::max);
            let amax = f32::from_bits(amax_bits);
            let (d, inv) = if amax > 0.0 {
                (amax / 127.0, 127.0 / amax)
            } else {
                (0.0, 0.0)
            };
            self.d[b] = d;
            let q = &mut self.q[b * BLOCK..(b + 1) * BLOCK];
            for (q, &v) in q.iter_mut().zip(block) {
                *q = round_to_i8(v * inv);
            }
            for (i, sixteen) in q.chunks_exact(16).enumerate() {
                self.sums16[b * 16 + i] = sixteen.iter().map(|&v| v as i16).sum();
            }
            for i in 0..8 {
                let s = &self.sums16[b * 16 + 2 * i..];
                self.sums32[b * 8 + i] = s[0] + s[1];
            }
        }
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Block `b` of row `r`: its 256 integers.
    #[inline(always)]
    pub fn q(&self, r: usize, b: usize) -> &[i8] {
        let at = r * self.k + b * BLOCK;
        &self.q[at..at + BLOCK]
    }

    /// The scale of block `b` of row `r`.
    #[inline(always)]
    pub fn d(&self, r: usize, b: usize) -> f32 {
        self.d[r * self.k / BLOCK + b]
    }

    /// The 16 sums of 16 integers of block `b` of row `r`.
    #[inline(always)]
    pub fn sums16(&self, r: usize, b: usize) -> &[i16] {
        let at = (r * self.k / BLOCK + b) * 16;
        &self.sums16[at..at + 16]
    }

    /// The 8 sums of 32 integers of block `b` of row `r`.
    #[inline(always)]
    pub fn sums32(&self, r: usize, b: usize) -> &[i16] {
        let at = (r * self.k / BLOCK + b) * 8;
        &self.sums32[at..at + 8]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_to_the_nearest_step_of_their_largest_value() {
        let k = 512;
        let x: Vec<f32> = (0..2 * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        let mut acts = Q8Activations::default();
        acts.quantize(&x, 2, k);
        for r in 0..2 {
            for b in 0..k / BLOCK {
                let block = &x[r * k + b * BLOCK..r * k + (b + 1) * BLOCK];
                let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let d = acts.d(r, b);
                assert_eq!(d, amax / 127.0);
                let q = acts.q(r, b);
                assert!(
                    q.iter().any(|&v| v.abs() == 127),
                    "the largest value maps to ±127"
                );
                for (&v, &qv) in block.iter().zip(q) {
                    assert!((qv as f32 * d - v).abs() <= 0.5 * d * 1.0001, "{v} -> {qv}");
                }
                let sums: i16 = acts.sums16(r, b).iter().sum();
                assert_eq!(sums as i32, q.iter().map(|&v| v as i32).sum::<i32>());
                assert_eq!(
                    acts.sums32(r, b)[3],
                    acts.sums16(r, b)[6] + acts.sums16(r, b)[7]
                );
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even() {
        for v in [
            -127.0f32, -2.5, -1.5, -0.5, -0.49, 0.0, 0.5, 0.51, 1.5, 2.5, 126.5, 127.0,
        ] {
            assert_eq!(round_to_i8(v), v.round_ties_even() as i8, "{v}");
        }
    }

    #[test]
    fn quantization_equals_the_plain_float_definition() {
        // The definition, spelled with std's float max, rounding and saturating cast.
        fn reference(block: &[f32]) -> (f32, Vec<i8>) {
            let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let (d, inv) = if amax > 0.0 {
                (amax / 127.0, 127.0 / amax)
            } else {
                (0.0, 0.0)
            };
            let q = block
                .iter()
                .map(|&v| (v * inv).round_ties_even().clamp(-127.0, 127.0) as i8)
                .collect();
            (d, q)
        }
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut x: Vec<f32> = (0..8 * BLOCK)
            .map(|_| (next() % 2_000_001) as f32 / 1e6 - 1.0)
            .collect();
        // Halfway points of the step, zeros, a subnormal, an infinity and NaNs.
        x[BLOCK..BLOCK + 5].copy_from_slice(&[127.0, 0.5, -0.5, 1.5, -2.5]);
        x[2 * BLOCK..3 * BLOCK].fill(0.0);
        x[3 * BLOCK + 7] = f32::from_bits(1);
        x[4 * BLOCK + 9] = f32::INFINITY;
        x[5 * BLOCK + 11] = f32::NAN;
        x[6 * BLOCK..7 * BLOCK].fill(f32::NAN);
        let mut acts = Q8Activations::default();
        acts.quantize(&x, 2, 4 * BLOCK);
        for r in 0..2 {
            for b in 0..4 {
                let at = r * 4 * BLOCK + b * BLOCK;
                let (d, q) = reference(&x[at..at + BLOCK]);
                assert_eq!(acts.d(r, b).to_bits(), d.to_bits(), "row {r} block {b}");
                assert_eq!(acts.q(r, b), &q[..], "row {r} block {b}");
            }
        }
    }

    #[test]
    fn a_zero_block_has_a_zero_scale() {
        let mut acts = Q8Activations::default();
        acts.quantize(&[0.0; 256], 1, 256);
        assert_eq!(acts.d(0, 0), 0.0);
        assert!(acts.q(0, 0).iter().all(|&v| v == 0));
    }
}
