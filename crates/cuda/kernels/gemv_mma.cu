// Skinny products for 2..8 tokens on bf16 weights with the tensor cores doing the
// multiply-adds: y[t, r] = sum_k W[r, k] * x[t, k], W bf16 [rows, k], x bf16 [n, k], y f32 with
// row stride ldy; k % 128 == 0.
//
// Why: gemv.cu multiplies each weight once per token on the CUDA cores, so its time grows with
// the tokens (8B shape, H200, 2026-12-04: 4.57 ms a step for one token, 11.4 for eight). Here
// `mma.m16n8k16` takes the weights as they are stored (bf16 pairs are A fragments), the mma's 8
// columns are the tokens, and eight tokens cost about what one does: the kernel only streams.
//
// The tile: a warp takes 16 rows; lane (g = lane / 4, t = lane % 4) reads elements 32 t .. 32 t
// + 32 of rows g and g + 8 in every 128-element block, and uses elements e .. e + 3 (e = 32 t +
// 4 j) in the block's mma step j as its k slots 2 t, 2 t + 1, 2 t + 8, 2 t + 9 (the mma's k
// order is any permutation A and B share); B's column g is token g's x at the same elements,
// zero for g >= n (mma.cuh has the fragments). Each row's sum order depends on k and the
// split alone, not on n. Thread block: 8 warps, 8 / SPLIT tiles of 16 rows, SPLIT warps per
// tile along k (partials summed in order through shared memory).
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

// One lane's words of one block: 32 weights of rows g and g + 8, and 32 x values.
struct Bf16Lane {
    uint4 w0[4], w8[4], x[4];
};

template <int SPLIT>
__device__ __forceinline__ void bf16_mma_gemv(const bf16* __restrict__ w,
                                              const bf16* __restrict__ x, float* __restrict__ y,
                                              int rows, int k, int ldy, int n) {
    __shared__ float s_part[8][16][8];  // [warp][row in tile][token]
    const SkinnyTile<SPLIT, 16> tile(k / 128);
    const int g = tile.g, t = tile.t, row0 = tile.row0, b_begin = tile.b_begin, b_end = tile.b_end;
    // Rows past the end read the last row and are not written. 16 uint4 per block of a row.
    const uint4* r0 = reinterpret_cast<const uint4*>(w + (i64)min(row0 + g, rows - 1) * k) + 4 * t;
    const uint4* r8 = reinterpret_cast<const uint4*>(w + (i64)min(row0 + g + 8, rows - 1) * k) + 4 * t;
    const bool has_x = g < n;
    const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)(has_x ? g : 0) * k) + 4 * t;

    auto load_w = [&](Bf16Lane& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            l.w0[i] = __ldcs(r0 + 16 * b + i);
            l.w8[i] = __ldcs(r8 + 16 * b + i);
        }
    };
    auto load_x = [&](Bf16Lane& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) l.x[i] = has_x ? __ldg(xg + 16 * b + i) : make_uint4(0, 0, 0, 0);
    };
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    auto consume = [&](const Bf16Lane& l) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            // Elements 32 t + 4 j .. + 3: words 2 (j % 2), + 1 of uint4 j / 2.
            const int i = j >> 1, lo = 2 * (j & 1);
            mma_bf16(c, word_of(l.w0[i], lo), word_of(l.w8[i], lo), word_of(l.w0[i], lo + 1),
                     word_of(l.w8[i], lo + 1), word_of(l.x[i], lo), word_of(l.x[i], lo + 1));
        }
    };

    // Two blocks' words in registers, ping-ponged: one multiplied while the other's loads fly.
    // No kernel writes the weights: the first block's loads precede the wait.
    Bf16Lane la, lb;
    if (b_begin < b_end) load_w(la, b_begin);
    pdl_enter();
    if (b_begin < b_end) load_x(la, b_begin);
    for (int b = b_begin; b < b_end; b += 2) {
        if (b + 1 < b_end) {
            load_w(lb, b + 1);
            load_x(lb, b + 1);
        }
        consume(la);
        if (b + 1 >= b_end) break;
        if (b + 2 < b_end) {
            load_w(la, b + 2);
            load_x(la, b + 2);
        }
        consume(lb);
    }
    s_part[tile.warp][g][2 * t] = c[0];
    s_part[tile.warp][g][2 * t + 1] = c[1];
    s_part[tile.warp][g + 8][2 * t] = c[2];
    s_part[tile.warp][g + 8][2 * t + 1] = c[3];
    tile.store(s_part, y, rows, ldy, n, 1.0f);
}

// grid = ceil(rows / (16 * 8 / SPLIT)), block = 256 (8 warps).
#define GEMV_MMA_KERNEL(SPLIT)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) gemv_mma_bf16_s##SPLIT(                   \
        const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int rows, \
        int k, int ldy, int n) {                                                                \
        bf16_mma_gemv<SPLIT>(w, x, y, rows, k, ldy, n);                                         \
    }
GEMV_MMA_KERNEL(1)
GEMV_MMA_KERNEL(2)
GEMV_MMA_KERNEL(4)
GEMV_MMA_KERNEL(8)
