// Dummy weights drawn on the device: element i of a tensor is
//   bf16(offset + scale * (2u - 1)),  u = uniform(Philox(key = tensor seed, counter = i / 4)[i % 4])
// with multiply and add rounded separately (no FMA), exactly as the host generator in
// crates/model/src/dummy computes it, so both backends run bit-identical weights.
#include "philox.cuh"

// grid-stride over elements; n may be any length.
extern "C" __global__ void dummy_fill_bf16(bf16* __restrict__ out, u64 n, u64 seed, float scale,
                                           float offset) {
    pdl_enter();
    const u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
    const u64 groups = (n + 3) / 4;
    for (u64 grp = blockIdx.x * (u64)blockDim.x + threadIdx.x; grp < groups;
         grp += (u64)gridDim.x * blockDim.x) {
        const Philox4 rnd = philox4x32_10((u32)grp, (u32)(grp >> 32), 0, 0, k0, k1);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u64 i = grp * 4 + j;
            if (i < n) {
                const float centred = 2.0f * philox_uniform(rnd.v[j]) - 1.0f;  // exact
                out[i] = __float2bfloat16_rn(__fadd_rn(offset, __fmul_rn(scale, centred)));
            }
        }
    }
}

// Same values widened to f32 (norm weights and biases live in f32 on the device), plus
// `shift` added in f32 after the bf16 rounding: gemma's (1 + w) norm weights folded at load,
// as the loader does to weights read from a file (0 elsewhere, which is exact).
extern "C" __global__ void dummy_fill_f32(float* __restrict__ out, u64 n, u64 seed, float scale,
                                          float offset, float shift) {
    pdl_enter();
    const u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
    const u64 groups = (n + 3) / 4;
    for (u64 grp = blockIdx.x * (u64)blockDim.x + threadIdx.x; grp < groups;
         grp += (u64)gridDim.x * blockDim.x) {
        const Philox4 rnd = philox4x32_10((u32)grp, (u32)(grp >> 32), 0, 0, k0, k1);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u64 i = grp * 4 + j;
            if (i < n) {
                const float centred = 2.0f * philox_uniform(rnd.v[j]) - 1.0f;
                out[i] = __fadd_rn(__bfloat162float(__float2bfloat16_rn(
                                       __fadd_rn(offset, __fmul_rn(scale, centred)))),
                                   shift);
            }
        }
    }
}
