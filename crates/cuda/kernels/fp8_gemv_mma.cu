// Decode products on FP8 weights (ferrite_model::fp8: blocks of 128 e4m3 bytes, an f32 scale
// each) with the tensor cores doing the multiply-adds, for 2..8 tokens at once:
// y[t, row] = sum_k W[row, k] * x[t, k], x bf16 [n, k], y f32 with row stride ldy.
//
// Why: quant_gemv.cu turns an e4m3 byte into a float with three integer instructions and then
// multiplies once per token, so its step time grows with the tokens. Here
// `cvt.rn.f16x2.e4m3x2` makes two exact f16 weights in one instruction and `mma.m16n8k16`
// (f16 in, f32 sums) does the products; the mma's 8 columns are the tokens, so 8 tokens cost
// about what one does. One token stays on quant_gemv.cu, which is faster there: this kernel
// keeps fewer bytes in flight per SM. (Measured: docs/performance.md, '2026-12-04
// 20:09-20:32 UTC: FP8 weights kept as FP8'.)
//
// The tile: a warp takes 32 rows, two mma tiles of 16 sharing their B; lane (g = lane / 4,
// t = lane % 4) reads bytes 32 t .. 32 t + 32 of rows g, g + 8, g + 16 and g + 24 in every
// 128-weight block, and uses word j of them in the block's mma step j: its four weights,
// elements e .. e + 3 with e = 32 t + 4 j, fill the lane's k slots 2 t, 2 t + 1, 2 t + 8,
// 2 t + 9 (the mma's k order is any permutation shared by A and B; mma.cuh has the
// fragments). B's column g is token g: the lane loads that token's x at the same elements,
// zero for g >= n. After a block's 8 mma, each row's sums are scaled by its block scale.
//
// x becomes f16 times 2^-4 (undone at the end, exactly): bf16 values of 2^-10 to 2^20 stay
// exact, smaller ones keep at least the absolute precision of f16's subnormals (2^-20 here),
// below a bf16 ulp of any x over 2^-12, and f16's range would end at 2^20, far above
// activations. Each row's sum order depends on k and the split alone, not on n.
//
// Thread block: 8 warps, 8 / SPLIT tiles of 32 rows, SPLIT warps per tile along k (partials
// summed in order through shared memory).
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

#define FP8_X_SCALE 0.0625f
#define FP8_Y_SCALE 16.0f

// Two e4m3 weights (bytes 0, 1 and then 2, 3 of w) as two f16 pairs, exact.
__device__ __forceinline__ void e4m3_pairs(u32 w, u32& lo, u32& hi) {
    asm("{\n\t.reg .b16 a, b;\n\tmov.b32 {a, b}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, a;\n\tcvt.rn.f16x2.e4m3x2 %1, b;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}

// Two bf16 values (a word) as an f16 pair times 2^-4.
__device__ __forceinline__ u32 x_pair(u32 w) {
    const __half2 h = __floats2half2_rn(__uint_as_float(w << 16) * FP8_X_SCALE,
                                        __uint_as_float(w & 0xffff0000u) * FP8_X_SCALE);
    return *reinterpret_cast<const u32*>(&h);
}

// One lane's words of one block: 32 weight bytes of rows g, g + 8, g + 16 and g + 24 of the
// warp's 32, and 32 x values.
struct Fp8Lane {
    uint4 w[4][2];
    uint4 x[4];
};

template <int SPLIT>
__device__ __forceinline__ void fp8_mma_gemv(const float* __restrict__ scales,
                                             const unsigned char* __restrict__ q,
                                             const bf16* __restrict__ x, float* __restrict__ y,
                                             int rows, int k, int ldy, int n) {
    __shared__ float s_part[8][32][8];  // [warp][row in tile][token]
    const int nb = k / 128;
    const SkinnyTile<SPLIT, 32> tile(nb);
    const int g = tile.g, t = tile.t, row0 = tile.row0, b_begin = tile.b_begin, b_end = tile.b_end;
    // Rows g + 8 i of the tile; rows past the end read the last row and are not written.
    i64 rb[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) rb[i] = (i64)min(row0 + g + 8 * i, rows - 1) * nb;
    const bool has_x = g < n;
    const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)(has_x ? g : 0) * k) + 4 * t;

    auto load_w = [&](Fp8Lane& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4* r = reinterpret_cast<const uint4*>(q + (rb[i] + b) * 128) + 2 * t;
            l.w[i][0] = r[0];
            l.w[i][1] = r[1];
        }
    };
    auto load_x = [&](Fp8Lane& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) l.x[i] = has_x ? __ldg(xg + b * 16 + i) : make_uint4(0, 0, 0, 0);
    };
    float acc[2][4] = {};
    auto consume = [&](const Fp8Lane& l, int b) {
        float c[2][4] = {};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            // x elements 32 t + 4 j .. + 3: words 2 (j % 2), + 1 of x[j / 2].
            const uint4& xv = l.x[j >> 1];
            const u32 b0 = x_pair(word_of(xv, 2 * (j & 1)));
            const u32 b1 = x_pair(word_of(xv, 2 * (j & 1) + 1));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                u32 a0, a1, a2, a3;
                e4m3_pairs(word_of(l.w[2 * h][j >> 2], j & 3), a0, a2);
                e4m3_pairs(word_of(l.w[2 * h + 1][j >> 2], j & 3), a1, a3);
                mma_f16(c[h], a0, a1, a2, a3, b0, b1);
            }
        }
        // C of half h: c[h][0], c[h][1] are row g + 16 h, tokens 2 t, 2 t + 1; c[h][2], c[h][3]
        // row g + 16 h + 8.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float d0 = scales[rb[2 * h] + b], d8 = scales[rb[2 * h + 1] + b];
            acc[h][0] = fmaf(c[h][0], d0, acc[h][0]);
            acc[h][1] = fmaf(c[h][1], d0, acc[h][1]);
            acc[h][2] = fmaf(c[h][2], d8, acc[h][2]);
            acc[h][3] = fmaf(c[h][3], d8, acc[h][3]);
        }
    };

    // Two blocks' words in registers, ping-ponged: one multiplied while the other's loads fly.
    // Weights are never written by a kernel: the first block's loads precede the wait.
    Fp8Lane la, lb;
    if (b_begin < b_end) load_w(la, b_begin);
    pdl_enter();
    if (b_begin < b_end) load_x(la, b_begin);
    for (int b = b_begin; b < b_end; b += 2) {
        if (b + 1 < b_end) {
            load_w(lb, b + 1);
            load_x(lb, b + 1);
        }
        consume(la, b);
        if (b + 1 >= b_end) break;
        if (b + 2 < b_end) {
            load_w(la, b + 2);
            load_x(la, b + 2);
        }
        consume(lb, b + 1);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        s_part[tile.warp][16 * h + g][2 * t] = acc[h][0];
        s_part[tile.warp][16 * h + g][2 * t + 1] = acc[h][1];
        s_part[tile.warp][16 * h + g + 8][2 * t] = acc[h][2];
        s_part[tile.warp][16 * h + g + 8][2 * t + 1] = acc[h][3];
    }
    // x was scaled by 2^-4: the sums are scaled back (exactly).
    tile.store(s_part, y, rows, ldy, n, FP8_Y_SCALE);
}

// One block per SM (154 registers): capped at 128 for two, it spilled and decoded slower
// (measured: docs/performance.md, '2026-12-04 20:09-20:32 UTC: FP8 weights kept as FP8').
#define FP8_MMA_KERNEL(SPLIT)                                                                   \
    extern "C" __global__ void __launch_bounds__(256) fp8_gemv_mma_s##SPLIT(                    \
        const float* __restrict__ scales, const unsigned char* __restrict__ q,                  \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy, int n) {   \
        fp8_mma_gemv<SPLIT>(scales, q, x, y, rows, k, ldy, n);                                  \
    }
FP8_MMA_KERNEL(1)
FP8_MMA_KERNEL(2)
FP8_MMA_KERNEL(4)
FP8_MMA_KERNEL(8)
