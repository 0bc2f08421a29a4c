// Skinny products on GGUF-quantized weights for small decode batches (1..8 tokens):
// y[t, row] = sum_k W[row, k] * x[t, k], W in its file's quantized format (quant.cuh), x bf16
// [NT, K], y f32 with row stride ldy (a part of a fused Q/K/V or gate/up output).
//
// The weights are streamed once and dequantized in registers: one warp per row (SPLIT warps
// per row for long rows), each lane decoding one unit (32 or 64 elements) at a time while the
// next unit's words are already in flight; x is small and shared, read through the read-only
// cache. Accumulation in f32; each row's sum order depends on the shape alone.
#include "common.cuh"
#include "quant.cuh"

template <class Q, int NT, int SPLIT>
__device__ __forceinline__ void qgemv_rows(const Planes p, const bf16* __restrict__ x,
                                           float* __restrict__ y, int rows, int k, int ldy) {
    __shared__ float partial[8][8];  // [warp in block][token]
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int rows_per_block = (blockDim.x >> 5) / SPLIT;
    const int row = blockIdx.x * rows_per_block + warp / SPLIT;
    const int split_part = warp % SPLIT;
    const int blocks_per_row = k / Q::BLOCK;
    const int units = blocks_per_row * Q::UNITS;
    const int per_part = (units + SPLIT - 1) / SPLIT;
    const int u_begin = split_part * per_part;
    const int u_end = min(units, u_begin + per_part);
    const bool live = row < rows;
    const i64 row_block = (i64)(live ? row : 0) * blocks_per_row;

    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

    int u = u_begin + lane;
    typename Q::Unit cur;
    // Weights are never written by a kernel: the first loads may precede the wait (common.cuh).
    if (live && u < u_end) cur = Q::load(p, row_block + u / Q::UNITS, u % Q::UNITS);
    pdl_enter();
    for (; live && u < u_end; u += 32) {
        const int next = u + 32;
        typename Q::Unit nxt = cur;
        if (next < u_end) nxt = Q::load(p, row_block + next / Q::UNITS, next % Q::UNITS);
        const int part = u % Q::UNITS;
        const int base = (u / Q::UNITS) * Q::BLOCK;
#pragma unroll
        for (int g = 0; g < Q::GROUPS; ++g) {
            float w[8];
            Q::group(cur, part, g, w);
            const int c = base + Q::col(part, g);
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                float xf[8];
                unpack8(__ldg(reinterpret_cast<const uint4*>(x + (i64)t * k + c)), xf);
                float s = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) s += w[j] * xf[j];
                acc[t] += s;
            }
        }
        cur = nxt;
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = warp_sum(acc[t]);
    if (SPLIT == 1) {
        if (live && lane < NT) {
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
    if (split_part == 0 && live && lane < NT) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) total += partial[warp + s][lane];
        y[(i64)lane * ldy + row] = total;
    }
}

// grid = ceil(rows / (8 / SPLIT)), block = 256 (8 warps).
#define QGEMV_KERNEL(TYPE, NAME, NT, SPLIT)                                                      \
    extern "C" __global__ void qgemv_##NAME##_##NT##_s##SPLIT(                                  \
        const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,              \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy) {          \
        qgemv_rows<TYPE, NT, SPLIT>(Planes{p0, p1, p2}, x, y, rows, k, ldy);                    \
    }
#define QGEMV_SPLITS(TYPE, NAME, NT) QGEMV_KERNEL(TYPE, NAME, NT, 1) QGEMV_KERNEL(TYPE, NAME, NT, 4)
#define QGEMV_TYPE(TYPE, NAME)                                                                  \
    QGEMV_SPLITS(TYPE, NAME, 1)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 2)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 3)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 4)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 5)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 6)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 7)                                                                 \
    QGEMV_SPLITS(TYPE, NAME, 8)
QGEMV_TYPE(Q4_0, q4_0)
QGEMV_TYPE(Q4_1, q4_1)
QGEMV_TYPE(Q5_0, q5_0)
QGEMV_TYPE(Q8_0, q8_0)
QGEMV_TYPE(Q4_K, q4_k)
QGEMV_TYPE(Q5_K, q5_k)
QGEMV_TYPE(Q6_K, q6_k)
