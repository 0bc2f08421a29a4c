// Dequantizing quantized weights (quant.cuh: the GGUF types and FP8) on the device:
// - qdequant_*: rows [row0, row0 + rows) of a matrix into a bf16 scratch matrix [rows, k], for
//   the cuBLAS path of larger batches (one layer's matrix at a time: the model itself stays
//   quantized);
// - qembed_*: the embedding lookup, x[t, :] = table[tokens[t], :] * scale in f32.
// Bit for bit the host dequantizer's values (quant.cuh).
#define QUANT_EXACT_ROUNDING
#include "common.cuh"
#include "quant.cuh"

// One thread per group of 8 elements (one 16-byte store), grid-stride by warps: a warp takes
// 32 consecutive units at one group, and the next GROUPS - 1 warps the other groups of the
// same units. The group is then the same across the warp, so of the per-group code below a
// warp runs one branch; numbered lane by lane (group = thread % GROUPS), every warp ran all
// GROUPS branches, each for an eighth of its lanes, far below the memory bandwidth
// (docs/performance.md, '2026-12-04 15:42 UTC: the slab dequantizer without divergence', and
// 'Measurements formerly in source comments'). A store
// writes 16 bytes into each of 32 lines, whose other groups the neighbouring warps of the
// block write next, so whole lines leave L2. The slab's units are numbered from its first row
// on, so no division by the row length is needed.
template <class Q>
__device__ __forceinline__ void qdequant_rows(const Planes p, bf16* __restrict__ out, int row0,
                                              int rows, int k) {
    pdl_enter();
    const i64 first_block = (i64)row0 * (k / Q::BLOCK);
    const i64 units = (i64)rows * (k / Q::BLOCK) * Q::UNITS;
    const i64 warp_tasks = (units + 31) / 32 * Q::GROUPS;
    const int lane = threadIdx.x & 31;
    for (i64 task = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; task < warp_tasks;
         task += ((i64)gridDim.x * blockDim.x) >> 5) {
        const int g = (int)(task % Q::GROUPS);
        const i64 unit = task / Q::GROUPS * 32 + lane;
        if (unit >= units) continue;
        const int part = (int)(unit % Q::UNITS);
        const i64 block = unit / Q::UNITS;
        const typename Q::Unit u = Q::load(p, first_block + block, part);
        // The group's number made a constant (a runtime one would put the unit's words in
        // local memory to index them); the branch is uniform across the warp.
        float w[8];
#pragma unroll
        for (int c = 0; c < Q::GROUPS; ++c) {
            if (c == g) Q::group(u, part, c, w);
        }
        *reinterpret_cast<uint4*>(out + block * Q::BLOCK + Q::col(part, g)) = pack8(w);
    }
}

// grid = tokens, block = any multiple of 32.
template <class Q>
__device__ __forceinline__ void qembed_rows(const Planes p, const i32* __restrict__ tokens,
                                            float* __restrict__ x, int hidden, float scale) {
    pdl_enter();
    const int t = blockIdx.x;
    const int blocks_per_row = hidden / Q::BLOCK;
    const i64 first_block = (i64)tokens[t] * blocks_per_row;
    float* out = x + (i64)t * hidden;
    for (int u = threadIdx.x; u < blocks_per_row * Q::UNITS; u += blockDim.x) {
        const int part = u % Q::UNITS;
        const typename Q::Unit unit = Q::load(p, first_block + u / Q::UNITS, part);
        float* dst = out + (u / Q::UNITS) * Q::BLOCK;
#pragma unroll
        for (int g = 0; g < Q::GROUPS; ++g) {
            float w[8];
            Q::group(unit, part, g, w);
            float4* o = reinterpret_cast<float4*>(dst + Q::col(part, g));
            o[0] = make_float4(w[0] * scale, w[1] * scale, w[2] * scale, w[3] * scale);
            o[1] = make_float4(w[4] * scale, w[5] * scale, w[6] * scale, w[7] * scale);
        }
    }
}

#define QUANT_DEQUANT_KERNELS(TYPE, NAME)                                                        \
    extern "C" __global__ void qdequant_##NAME(const unsigned char* p0, const unsigned char* p1,  \
                                               const unsigned char* p2, bf16* __restrict__ out,  \
                                               int row0, int rows, int k) {                      \
        qdequant_rows<TYPE>(Planes{p0, p1, p2}, out, row0, rows, k);                             \
    }                                                                                            \
    extern "C" __global__ void qembed_##NAME(const unsigned char* p0, const unsigned char* p1,    \
                                             const unsigned char* p2,                            \
                                             const i32* __restrict__ tokens,                     \
                                             float* __restrict__ x, int hidden, float scale) {   \
        qembed_rows<TYPE>(Planes{p0, p1, p2}, tokens, x, hidden, scale);                         \
    }
QUANT_DEQUANT_KERNELS(Q4_0, q4_0)
QUANT_DEQUANT_KERNELS(Q4_1, q4_1)
QUANT_DEQUANT_KERNELS(Q5_0, q5_0)
QUANT_DEQUANT_KERNELS(Q8_0, q8_0)
QUANT_DEQUANT_KERNELS(Q4_K, q4_k)
QUANT_DEQUANT_KERNELS(Q5_K, q5_k)
QUANT_DEQUANT_KERNELS(Q6_K, q6_k)
QUANT_DEQUANT_KERNELS(FP8, fp8)
