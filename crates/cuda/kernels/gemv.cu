// Skinny matrix products for small decode batches (1..8 tokens), where a GEMM library tiles for
// large M and leaves bandwidth unused: y[t, r] = sum_k W[r, k] * x[t, k].
// W is bf16 [rows, K] (rows contiguous), x bf16 [NT, K], y f32 [NT, rows]; K % 8 == 0.
//
// One warp per output row; each lane streams 16-byte words of the row (8 in flight) so the
// weights are read exactly once and fully coalesced; x is small and shared by every warp, so it
// goes through the read-only cache. Accumulation in f32.
#include "common.cuh"

#define GEMV_UNROLL 8

template <int NT>
__device__ __forceinline__ void gemv_rows(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                          float* __restrict__ y, int rows, int k) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (i64)row * k);
    const int chunks = k / 8;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

    for (int base = 0; base < chunks; base += 32 * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) {
            const int c = base + u * 32 + lane;
            wv[u] = c < chunks ? __ldcs(wr + c) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) {
            const int c = base + u * 32 + lane;
            if (c < chunks) {
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
    for (int t = 0; t < NT; ++t) {
        const float total = warp_sum(acc[t]);
        if (lane == t) y[(i64)t * rows + row] = total;
    }
}

// grid = ceil(rows / (blockDim / 32)), block = 256.
#define GEMV_KERNEL(NT)                                                                   \
    extern "C" __global__ void gemv_bf16_##NT(const bf16* __restrict__ w,                  \
                                              const bf16* __restrict__ x,                  \
                                              float* __restrict__ y, int rows, int k) {    \
        gemv_rows<NT>(w, x, y, rows, k);                                                   \
    }
GEMV_KERNEL(1)
GEMV_KERNEL(2)
GEMV_KERNEL(3)
GEMV_KERNEL(4)
GEMV_KERNEL(5)
GEMV_KERNEL(6)
GEMV_KERNEL(7)
GEMV_KERNEL(8)
