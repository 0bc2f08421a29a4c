// Skinny products on quantized weights (GGUF types, FP8) for small decode batches (1..8 tokens):
// y[t, row] = sum_k W[row, k] * x[t, k], W in its file's quantized format (quant.cuh), x bf16
// [NT, K], y f32 with row stride ldy (a part of a fused Q/K/V or gate/up output).
//
// The weights are streamed once and dequantized in registers. A warp takes R rows at once (so
// each x value it loads serves R rows), SPLIT warps share the rows of a block's row group
// along k, and each lane decodes one unit (32 or 64 elements) of each of its R rows at a time
// while the next units' words are already in flight. Per run of elements sharing a scale the
// lane sums q * x over the raw integers and x alone, then adds a * (q . x) + b * sum(x) (the
// weight is a * q + b): one mask, one add and one multiply-add per weight. Accumulation in
// f32; each row's sum order depends on the shape alone.
#include "common.cuh"
#include "quant.cuh"

// Rows per warp for NT tokens (the host's qgemv_rows_per_warp). Two, not four: four rows took
// 192 registers (one block per SM) and decoded batch-1 slower (measured: docs/performance.md,
// '2026-12-04 04:30-05:10 UTC, faster GEMVs, side by side with llama.cpp'); one for more
// tokens, as x takes registers.
template <int NT>
struct RowsPerWarp {
    static constexpr int R = NT <= 4 ? 2 : 1;
};

template <class Q, int NT, int SPLIT>
__device__ __forceinline__ void qgemv_rows(const Planes p, const bf16* __restrict__ x,
                                           float* __restrict__ y, int rows, int k, int ldy) {
    constexpr int R = RowsPerWarp<NT>::R;
    __shared__ float partial[8][R * NT];  // [warp in block][row * NT + token]
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int groups_per_block = 8 / SPLIT;
    const int row0 = (blockIdx.x * groups_per_block + warp / SPLIT) * R;
    const int split_part = warp % SPLIT;
    const int blocks_per_row = k / Q::BLOCK;
    const int units = blocks_per_row * Q::UNITS;
    const int per_part = (units + SPLIT - 1) / SPLIT;
    const int u_begin = split_part * per_part;
    const int u_end = min(units, u_begin + per_part);
    // Rows past the end read the last row again and are not written.
    i64 row_block[R];
#pragma unroll
    for (int r = 0; r < R; ++r) row_block[r] = (i64)min(row0 + r, rows - 1) * blocks_per_row;

    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

    // Two sets of units in registers, ping-ponged: one decoded while the other's loads fly.
    typename Q::Unit ua[R], ub[R];
    auto load = [&](typename Q::Unit (&dst)[R], int unit) {
#pragma unroll
        for (int r = 0; r < R; ++r)
            dst[r] = Q::load(p, row_block[r] + unit / Q::UNITS, unit % Q::UNITS);
    };
    auto consume = [&](const typename Q::Unit (&cur)[R], int unit) {
        const int part = unit % Q::UNITS;
        const int base = (unit / Q::UNITS) * Q::BLOCK;
#pragma unroll
        for (int s = 0; s < Q::SUBS; ++s) {
            float qx[R][NT], sx[NT];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                sx[t] = 0.0f;
#pragma unroll
                for (int r = 0; r < R; ++r) qx[r][t] = 0.0f;
            }
#pragma unroll
            for (int gg = 0; gg < Q::SUB_GROUPS; ++gg) {
                const int g = s * Q::SUB_GROUPS + gg;
                const int c = base + Q::col(part, g);
                float xf[NT][8];
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    unpack8(__ldg(reinterpret_cast<const uint4*>(x + (i64)t * k + c)), xf[t]);
                    if constexpr (HasOffset<Q>::value) {
#pragma unroll
                        for (int j = 0; j < 8; ++j) sx[t] += xf[t][j];
                    }
                }
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float q[8];
                    Q::raw(cur[r], part, g, q);
#pragma unroll
                    for (int t = 0; t < NT; ++t)
#pragma unroll
                        for (int j = 0; j < 8; ++j) qx[r][t] = fmaf(q[j], xf[t][j], qx[r][t]);
                }
            }
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float a, b;
                Q::affine(cur[r], part, s, a, b);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if constexpr (HasOffset<Q>::value) {
                        acc[r][t] += fmaf(a, qx[r][t], b * sx[t]);
                    } else {
                        acc[r][t] = fmaf(a, qx[r][t], acc[r][t]);
                    }
                }
            }
        }
    };
    int u = u_begin + lane;
    // Weights are never written by a kernel: the first loads may precede the wait (common.cuh).
    if (u < u_end) load(ua, u);
    pdl_enter();
    while (u < u_end) {
        if (u + 32 < u_end) load(ub, u + 32);
        consume(ua, u);
        u += 32;
        if (u >= u_end) break;
        if (u + 32 < u_end) load(ua, u + 32);
        consume(ub, u);
        u += 32;
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
    if constexpr (SPLIT > 1) {
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int t = 0; t < NT; ++t) partial[warp][r * NT + t] = acc[r][t];
        }
        __syncthreads();
        if (split_part == 0 && lane < R * NT) {
            float total = 0.0f;
#pragma unroll
            for (int s = 0; s < SPLIT; ++s) total += partial[warp + s][lane];
            const int r = lane / NT, t = lane % NT;
            if (row0 + r < rows) y[(i64)t * ldy + row0 + r] = total;
        }
    } else {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (lane == r * NT + t && row0 + r < rows) y[(i64)t * ldy + row0 + r] = acc[r][t];
            }
    }
}

// grid = ceil(rows / (8 / SPLIT * R)), block = 256 (8 warps).
#define QGEMV_KERNEL(TYPE, NAME, NT, SPLIT)                                                      \
    extern "C" __global__ void __launch_bounds__(256) qgemv_##NAME##_##NT##_s##SPLIT(           \
        const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,              \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy) {          \
        qgemv_rows<TYPE, NT, SPLIT>(Planes{p0, p1, p2}, x, y, rows, k, ldy);                    \
    }
#define QGEMV_SPLITS(TYPE, NAME, NT)                                                            \
    QGEMV_KERNEL(TYPE, NAME, NT, 1)                                                             \
    QGEMV_KERNEL(TYPE, NAME, NT, 2) QGEMV_KERNEL(TYPE, NAME, NT, 4) QGEMV_KERNEL(TYPE, NAME, NT, 8)
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
// FP8 for one token only: more go through the tensor cores (fp8_gemv_mma.cu).
QGEMV_SPLITS(FP8, fp8, 1)
