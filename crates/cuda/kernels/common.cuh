// Shared by every kernel: fixed-width integer names (NVRTC has no <cstdint>), bf16 packing,
// and warp reductions. Included textually (build.rs and the NVRTC loader both inline it).
#pragma once
#include <cuda_bf16.h>

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;
typedef __nv_bfloat16 bf16;

#define FULL_MASK 0xffffffffu

// Eight bf16 values moved as one 16-byte word.
union Pack8 {
    uint4 raw;
    __nv_bfloat162 pairs[4];
};

__device__ __forceinline__ void unpack8(const uint4 raw, float out[8]) {
    Pack8 p;
    p.raw = raw;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 f = __bfloat1622float2(p.pairs[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

// Four bf16 values from an 8-byte aligned address, as floats.
__device__ __forceinline__ float4 load4_bf16(const bf16* p) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__device__ __forceinline__ uint4 pack8(const float in[8]) {
    Pack8 p;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        p.pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
    }
    return p.raw;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats; the call ends with a barrier so scratch can be reused.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = lane < warps ? scratch[lane] : 0.0f;
    total = warp_sum(total);
    __syncthreads();
    return total;
}

// -inf without <math.h> (NVRTC has none).
#define NEG_INF __int_as_float(0xff800000)

// gpt-oss's attention sinks: a learned logit per head that joins the softmax's denominator
// (and no numerator). With scores in log2 units and the row's running maximum m, its share is
// 2^(sink log2(e) - m); 0 without sinks (NULL) or before the row saw any key.
__device__ __forceinline__ float sink_share(const float* __restrict__ sinks, int head, float m) {
    if (sinks == nullptr || m == NEG_INF) return 0.0f;
    return exp2f(fmaf(sinks[head], 1.4426950408889634f, -m));
}

// Programmatic dependent launch (sm_90). The host launches every kernel with programmatic
// stream serialization, so a kernel's blocks may be scheduled while its predecessor is still
// draining, hiding the launch gap between the ~300 small kernels of a decode step. The rule
// each kernel keeps: pdl_wait() before it reads anything an earlier kernel wrote and before it
// writes anything (it returns once the predecessor grid has completed and its writes are
// visible; the predecessor itself waited for its own, so every earlier kernel is done), then
// pdl_launch_dependents() to let the next kernel be scheduled. Only reads of data no kernel
// writes may come before the wait: weights, and the step's metadata (token ids, positions,
// page lists), which the host uploads before the step's first kernel. Both are no-ops
// without the launch attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_launch_dependents();
}
