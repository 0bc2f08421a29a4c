//! Philox4x32-10 (Salmon et al., SC'11), the counter-based generator the dummy weights and the
//! CUDA sampler draw from. The CUDA twin is `crates/cuda/kernels/philox.cuh`; both must give
//! the same words for the same (counter, key).

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Ten rounds over `counter` with `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for _ in 0..10 {
        let (hi0, lo0) = mul_hi_lo(M0, c0);
        let (hi1, lo1) = mul_hi_lo(M1, c2);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
        k0 = k0.wrapping_add(W0);
        k1 = k1.wrapping_add(W1);
    }
    [c0, c1, c2, c3]
}

/// A uniform float strictly inside (0, 1) from the top 23 bits; exact in f32.
pub fn uniform(bits: u32) -> f32 {
    ((bits >> 9) as f32 + 0.5) * (1.0 / (1u32 << 23) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_random123_known_answers() {
        // Known-answer vectors of Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniforms_stay_strictly_inside_the_unit_interval() {
        assert!(uniform(0) > 0.0);
        assert!(uniform(u32::MAX) < 1.0);
        assert_eq!(uniform(u32::MAX), 1.0 - 0.5 / (1u32 << 23) as f32);
    }
}
