// The loop every CUDA-core GEMV runs (gemv.cu, gemv_fused.cu): one group of SPLIT warps
// computes R output rows for NT tokens, each warp over a contiguous 1/SPLIT of K.
//
// Summation order, which the fused kernels rely on to give the plain ones' bits: each lane
// adds the dot products of 8-element chunks lane, lane + 32, lane + 64, ... of its part (in
// that order, whatever UNROLL is), the warp's lanes then meet by the xor butterfly, and a
// row's SPLIT partial sums are added in part order, starting from 0.
#pragma once
#include "common.cuh"

// A token row of x read from global memory through the read-only cache (the plain GEMVs).
struct GlobalInput {
    const bf16* __restrict__ x;
    int k;
    // Called once every weight stream of the block has its first loads out.
    __device__ __forceinline__ void prepare() const { pdl_enter(); }
    __device__ __forceinline__ void load(int t, int c, float xf[8]) const {
        unpack8(__ldg(reinterpret_cast<const uint4*>(x + (i64)t * k) + c), xf);
    }
};

// `row[r]` (r < R) are this group's weight rows, all valid or `live` false (the group has no
// rows: it still reaches the block's barriers). `input` gives x, `out.store(t, v)` receives
// token t's sums v[0..R) in one lane. Block = 256 threads (8 warps, 8 / SPLIT groups).
template <int NT, int SPLIT, int R, int UNROLL, typename Input, typename Out>
__device__ __forceinline__ void gemv_group(const bf16* __restrict__ w, int k, const int (&row)[R],
                                           bool live, const Input& input, Out& out) {
    __shared__ float partial[8][R * NT];  // [warp in block][row, token]
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int part = warp % SPLIT;
    const int chunks = k / 8;
    const int per_part = (chunks + SPLIT - 1) / SPLIT;
    const int c_begin = part * per_part;
    const int c_end = min(chunks, c_begin + per_part);
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    }
    const uint4* wr[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint4*>(w + (i64)(live ? row[r] : 0) * k);
    uint4 wv[R][UNROLL];
    auto load = [&](int base) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c = base + u * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                wv[r][u] = live && c < c_end ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
    };
    // No kernel writes the weights, so their first loads go out before the wait for the
    // previous kernel (common.cuh): the weight stream starts while that kernel drains.
    load(c_begin);
    input.prepare();
    for (int base = c_begin; base < c_end; base += 32 * UNROLL) {
        if (base != c_begin) load(base);
        if (!live) continue;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int c = base + u * 32 + lane;
            if (c < c_end) {
                float wf[R][8];
#pragma unroll
                for (int r = 0; r < R; ++r) unpack8(wv[r][u], wf[r]);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    float xf[8];
                    input.load(t, c, xf);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        float s = 0.0f;
#pragma unroll
                        for (int j = 0; j < 8; ++j) s += wf[r][j] * xf[j];
                        acc[r][t] += s;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
    }
    if (SPLIT == 1) {
        if (!live) return;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (lane == t) {
                float v[R];
#pragma unroll
                for (int r = 0; r < R; ++r) v[r] = acc[r][t];
                out.store(t, v);
            }
        }
        return;
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int t = 0; t < NT; ++t) partial[warp][r * NT + t] = acc[r][t];
        }
    }
    __syncthreads();
    if (part == 0 && live && lane < NT) {
        float v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            float total = 0.0f;
#pragma unroll
            for (int p = 0; p < SPLIT; ++p) total += partial[warp + p][r * NT + lane];
            v[r] = total;
        }
        out.store(lane, v);
    }
}

// This block's group and the number of groups a block holds.
template <int SPLIT>
__device__ __forceinline__ int gemv_group_index() {
    return blockIdx.x * (8 / SPLIT) + (threadIdx.x >> 5) / SPLIT;
}
