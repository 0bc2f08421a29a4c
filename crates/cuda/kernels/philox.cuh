// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a counter-based
// generator, so any element's random number is a pure function of (key, counter) and the GPU
// and the Rust reference (crates/model/src/dummy/philox.rs) draw the same stream.
#pragma once
#include "common.cuh"

struct Philox4 {
    u32 v[4];
};

__device__ __forceinline__ Philox4 philox4x32_10(u32 c0, u32 c1, u32 c2, u32 c3, u32 k0, u32 k1) {
    const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    const u32 W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const u32 hi0 = __umulhi(M0, c0), lo0 = M0 * c0;
        const u32 hi1 = __umulhi(M1, c2), lo1 = M1 * c2;
        const u32 n0 = hi1 ^ c1 ^ k0;
        const u32 n1 = lo1;
        const u32 n2 = hi0 ^ c3 ^ k1;
        const u32 n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += W0;
        k1 += W1;
    }
    Philox4 out;
    out.v[0] = c0; out.v[1] = c1; out.v[2] = c2; out.v[3] = c3;
    return out;
}

// A uniform float strictly inside (0, 1): the top 23 bits, centred in their interval. Every
// step is exact in f32 (23 bits + one half bit fit the 24-bit significand), so the Rust
// reference gets the same value bit for bit.
__device__ __forceinline__ float philox_uniform(u32 bits) {
    return ((float)(bits >> 9) + 0.5f) * 1.1920928955078125e-7f;  // 2^-23
}
