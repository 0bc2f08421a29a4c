// Skinny matrix products for small decode batches (1..8 tokens), where a GEMM library tiles for
// large M and leaves bandwidth unused: y[t, r] = sum_k W[r, k] * x[t, k].
// W is bf16 [rows, K] (rows contiguous), x bf16 [NT, K], y f32 [NT, ldy] (ldy >= rows: a part of
// a wider output); K % 8 == 0.
//
// One warp per output row; each lane streams 16-byte words of the row (8 in flight) so the
// weights are read exactly once and fully coalesced; x is small and shared by every warp, so it
// goes through the read-only cache. Accumulation in f32.
#include "common.cuh"

#define GEMV_UNROLL 8

template <int NT, int SPLIT>
__device__ __forceinline__ void gemv_rows(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                          float* __restrict__ y, int rows, int k, int ldy) {
    // SPLIT warps share a row, each over a contiguous 1/SPLIT of K; their partial sums meet in
    // shared memory. Long rows (the down projection) then keep enough loads in flight.
    __shared__ float partial[8][8];  // [warp in block][token]
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int rows_per_block = (blockDim.x >> 5) / SPLIT;
    const int row = blockIdx.x * rows_per_block + warp / SPLIT;
    const int part = warp % SPLIT;
    const int chunks = k / 8;
    const int per_part = (chunks + SPLIT - 1) / SPLIT;
    const int c_begin = part * per_part;
    const int c_end = min(chunks, c_begin + per_part);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

    const bool live = row < rows;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (i64)(live ? row : 0) * k);
    uint4 wv[GEMV_UNROLL];
    auto load = [&](int base) {
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) {
            const int c = base + u * 32 + lane;
            wv[u] = live && c < c_end ? __ldcs(wr + c) : make_uint4(0, 0, 0, 0);
        }
    };
    // No kernel writes the weights, so their first loads go out before the wait for the
    // previous kernel (common.cuh): the weight stream starts while that kernel drains.
    load(c_begin);
    pdl_enter();
    for (int base = c_begin; base < c_end; base += 32 * GEMV_UNROLL) {
        if (base != c_begin) load(base);
        if (!live) continue;
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) {
            const int c = base + u * 32 + lane;
            if (c < c_end) {
                float wf[8];
                unpack8(wv[u], wf);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    float xf[8];
                    unpack8(__ldg(reinterpret_cast<const uint4*>(x + (i64)t * k) + c), xf);
                    float s = 0.0f;
#pragma unroll
                    for (int j = 0; j < 8; ++j) s += wf[j] * xf[j];
                    acc[t] += s;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = warp_sum(acc[t]);
    if (SPLIT == 1) {
        if (row < rows) {
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (lane == t) y[(i64)t * ldy + row] = acc[t];
            }
        }
        return;
    }
    if (lane == 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) partial[warp][t] = acc[t];
    }
    __syncthreads();
    if (part == 0 && row < rows && lane < NT) {
        float total = 0.0f;
#pragma unroll
        for (int p = 0; p < SPLIT; ++p) total += partial[warp + p][lane];
        y[(i64)lane * ldy + row] = total;
    }
}

// grid = ceil(rows / (8 / SPLIT)), block = 256 (8 warps).
#define GEMV_KERNEL(NT, SPLIT)                                                             \
    extern "C" __global__ void gemv_bf16_##NT##_s##SPLIT(const bf16* __restrict__ w,        \
                                                         const bf16* __restrict__ x,        \
                                                         float* __restrict__ y, int rows,   \
                                                         int k, int ldy) {                  \
        gemv_rows<NT, SPLIT>(w, x, y, rows, k, ldy);                                       \
    }
#define GEMV_KERNELS(NT) GEMV_KERNEL(NT, 1) GEMV_KERNEL(NT, 4) GEMV_KERNEL(NT, 8)
GEMV_KERNELS(1)
GEMV_KERNELS(2)
GEMV_KERNELS(3)
GEMV_KERNELS(4)
GEMV_KERNELS(5)
GEMV_KERNELS(6)
GEMV_KERNELS(7)
GEMV_KERNELS(8)
