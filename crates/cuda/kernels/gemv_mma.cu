// Skinny products for 1..64 tokens on bf16 weights with the tensor cores doing the
// multiply-adds: y[t, r] = sum_k W[r, k] * x[t, k], W bf16 [rows, k], x bf16 [n, k], y f32 with
// row stride ldy; k % 32 == 0.
//
// Why: gemv.cu multiplies each weight once per token on the CUDA cores, so its time grows with
// the tokens (measured: docs/performance.md, '2026-12-04 20:09-20:32 UTC: FP8 weights kept as
// FP8', and '2026-12-04 20:53 UTC: bf16 decode of 2..8 tokens on the tensor cores'). Here
// `mma.m16n8k16` takes the weights as they are stored (bf16 pairs are A fragments), the mma's 8
// columns are tokens, and eight tokens cost about what one does: the kernel only streams. T
// groups of 8 tokens share each weight fragment.
//
// The arithmetic is the batch-invariant order (bf16_order.cuh), which tile_mma.cu computes too:
// a token's row does not depend on how many tokens share the launch, nor on which kernel runs.
// The tile: a warp takes 16 rows; lane (g = lane / 4, t = lane % 4) reads elements 32 t .. 32 t
// + 32 of rows g and g + 8 in every 128-element block, and x of token 8 i + g of each group i.
// Thread block: 8 warps, 8 / SPLIT tiles of 16 rows, SPLIT warps per tile along k (partials
// summed in order through shared memory).
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"
#include "bf16_order.cuh"

// One lane's weight words of one block: 32 weights of rows g and g + 8.
struct Bf16Rows {
    uint4 w0[4], w8[4];
};

template <int T, int SPLIT>
__device__ __forceinline__ void bf16_mma_gemv(const bf16* __restrict__ w,
                                              const bf16* __restrict__ x, float* __restrict__ y,
                                              int rows, int k, int ldy, int n) {
    __shared__ float s_part[8][16][8 * T];  // [warp][row in tile][token]
    const int nb = bf16_order_blocks(k);
    const SkinnyTile<SPLIT, 16> tile(nb);
    const int g = tile.g, t = tile.t, row0 = tile.row0, b_begin = tile.b_begin, b_end = tile.b_end;
    // Rows past the end read the last row and are not written. 16 uint4 per block of a row.
    const uint4* r0 = reinterpret_cast<const uint4*>(w + (i64)min(row0 + g, rows - 1) * k) + 4 * t;
    const uint4* r8 = reinterpret_cast<const uint4*>(w + (i64)min(row0 + g + 8, rows - 1) * k) + 4 * t;
    // The lane's 32 elements of block b exist when 128 b + 32 t < k (k % 32 == 0): the last
    // block of a k that is not a multiple of 128 is zero-padded, the same way in tile_mma.cu.
    auto lane_has = [&](int b) { return 128 * b + 32 * t < k; };

    auto load_w = [&](Bf16Rows& l, int b) {
        const bool has = lane_has(b);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            l.w0[i] = has ? __ldcs(r0 + 16 * b + i) : make_uint4(0, 0, 0, 0);
            l.w8[i] = has ? __ldcs(r8 + 16 * b + i) : make_uint4(0, 0, 0, 0);
        }
    };
    float c[T][4];
#pragma unroll
    for (int i = 0; i < T; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
    auto consume = [&](const Bf16Rows& l, int b) {
        const bool has = lane_has(b);
#pragma unroll
        for (int grp = 0; grp < T; ++grp) {
            const int tok = 8 * grp + g;
            uint4 xv[4];
            const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)(tok < n ? tok : 0) * k) + 4 * t;
#pragma unroll
            for (int i = 0; i < 4; ++i)
                xv[i] = has && tok < n ? __ldg(xg + 16 * b + i) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int j = 0; j < 8; ++j) bf16_order_step(c[grp], l.w0, l.w8, xv, j);
        }
    };

    // Two blocks' weights in registers, ping-ponged: one multiplied while the other's loads
    // fly. The first block's loads precede the wait: a launch on weights the previous kernel
    // writes (a dequantized slab) does not overlap it (crate::kernels::gemv).
    Bf16Rows la, lb;
    if (b_begin < b_end) load_w(la, b_begin);
    pdl_enter();
    for (int b = b_begin; b < b_end; b += 2) {
        if (b + 1 < b_end) load_w(lb, b + 1);
        consume(la, b);
        if (b + 1 >= b_end) break;
        if (b + 2 < b_end) load_w(la, b + 2);
        consume(lb, b + 1);
    }
#pragma unroll
    for (int grp = 0; grp < T; ++grp) {
        s_part[tile.warp][g][8 * grp + 2 * t] = c[grp][0];
        s_part[tile.warp][g][8 * grp + 2 * t + 1] = c[grp][1];
        s_part[tile.warp][g + 8][8 * grp + 2 * t] = c[grp][2];
        s_part[tile.warp][g + 8][8 * grp + 2 * t + 1] = c[grp][3];
    }
    __syncthreads();
    if (tile.part != 0) return;
    // The split's partials in order from 0.0f (bf16_order.cuh), as tile_mma.cu folds them.
#pragma unroll
    for (int i = 0; i < T * 4; ++i) {
        const int pair = tile.lane + 32 * i, r = pair / (8 * T), tok = pair % (8 * T);
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) total += s_part[tile.warp + s][r][tok];
        if (tok < n && row0 + r < rows) y[(i64)tok * ldy + row0 + r] = total;
    }
}

// grid = ceil(rows / (16 * 8 / SPLIT)), block = 256 (8 warps); n <= 8 T.
#define GEMV_MMA_KERNEL(T, SPLIT)                                                               \
    extern "C" __global__ void __launch_bounds__(256) gemv_mma_bf16_t##T##_s##SPLIT(            \
        const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int rows, \
        int k, int ldy, int n) {                                                                \
        bf16_mma_gemv<T, SPLIT>(w, x, y, rows, k, ldy, n);                                      \
    }
#define GEMV_MMA_KERNELS(T) \
    GEMV_MMA_KERNEL(T, 1) GEMV_MMA_KERNEL(T, 2) GEMV_MMA_KERNEL(T, 4) GEMV_MMA_KERNEL(T, 8)
GEMV_MMA_KERNELS(1)
GEMV_MMA_KERNELS(2)
GEMV_MMA_KERNELS(4)
GEMV_MMA_KERNELS(8)
