// The batch-invariant product of 1..64 tokens on a quantized matrix (the GGUF types, FP8):
// y[t, r] = sum_k W[r, k] x[t, k] with W's values exactly what quant_dequant.cu writes (the
// host dequantizer's, rounded to bf16) and the sums in bf16_order.cuh's order. From 9 tokens a
// quantized matrix is dequantized into a bf16 scratch and multiplied by gemv_mma.cu or
// tile_mma.cu, which sum in the same order: so a token's row is the same whether it ran alone
// or batched. (quant_gemv.cu and quant_gemv_mma.cu, faster at one token, sum raw integers run
// by run and scale afterwards: their rows differ from the dequantized product's in the last
// bits.) Beyond one token it is also the default path's product up to 64 tokens: the weights
// are decoded once per block of k for every group of 8 tokens, where quant_gemv.cu decodes
// them per token on the CUDA cores and the slabs write and read a bf16 copy.
//
// A warp takes 16 rows. For each 128-element block of k, its lanes decode the block's units of
// the 16 rows as the dequantizer does (each unit's groups with constant group numbers) into the
// warp's slice of shared memory, as bf16; then each lane reads its mma fragments there
// (elements 32 u + 8 i .. + 7 of rows g and g + 8: the skinny product's layout, with
// tile_mma.cu's swizzle) and runs the block's 8 steps against x. Thread block: 8 warps, 8 /
// SPLIT tiles of 16 rows, SPLIT warps per tile along k (partials summed in order).
#define QUANT_EXACT_ROUNDING
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"
#include "bf16_order.cuh"

// As tile_mma.cu's: chunk ch (16 bytes) of row r of a 128-element smem row.
__device__ __forceinline__ int ordered_swizzle(int r, int ch) {
    return ch ^ ((((ch >> 3) & 1) << 1) | (r & 1));
}

// Decodes elements 128 b .. 128 b + 127 of rows row0 .. row0 + 15 (rows past the end repeat
// the last; elements past k are zero) into tile[16 rows][16 chunks].
template <class Q>
__device__ __forceinline__ void decode_block(const Planes& p, int rows, int k, int row0, int b,
                                             uint4* tile, int lane) {
    constexpr int UNIT = Q::BLOCK / Q::UNITS;  // elements per unit
    constexpr int PER_BLOCK = 128 / UNIT;       // units per row in a 128-element block
    constexpr int TASKS = 16 * PER_BLOCK;       // units of the tile
    const i64 blocks_per_row = k / Q::BLOCK;
#pragma unroll
    for (int task = lane; task < TASKS; task += 32) {
        const int r = task / PER_BLOCK, j = task % PER_BLOCK;
        const int row = min(row0 + r, rows - 1);
        const i64 unit = (i64)b * PER_BLOCK + j;  // unit index within the row
        const int fb = (int)(unit / Q::UNITS), part = (int)(unit % Q::UNITS);
        const bool inside = (i64)fb * Q::BLOCK < k;
        typename Q::Unit u;
        if (inside) u = Q::load(p, row * blocks_per_row + fb, part);
#pragma unroll
        for (int g = 0; g < Q::GROUPS; ++g) {
            float w[8];
            if (inside) {
                Q::group(u, part, g, w);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) w[e] = 0.0f;
            }
            const int col = fb * Q::BLOCK + Q::col(part, g) - 128 * b;  // 0..127
            tile[r * 16 + ordered_swizzle(r, col / 8)] = pack8(w);
        }
    }
}

// GROUPS: most groups of 8 tokens (the mma's columns) a launch takes: 1, or 8 (64 tokens,
// SKINNY_MAX_TOKENS) for the wide kernels, whose accumulators cost registers the 1-group
// kernels keep free for occupancy.
template <class Q, int SPLIT, int GROUPS>
__device__ __forceinline__ void ordered_qgemv(const Planes p, const bf16* __restrict__ x,
                                              float* __restrict__ y, int rows, int k, int ldy,
                                              int n) {
    __shared__ uint4 s_tile[8][16 * 16];  // [warp][row * 16 + chunk]
    __shared__ float s_part[8][16][8];
    const int nb = bf16_order_blocks(k);
    const SkinnyTile<SPLIT, 16> tile(nb);
    const int g = tile.g, t = tile.t;
    uint4* mine = s_tile[tile.warp];
    // Tokens in groups of 8 (the mma's columns), each decoded block of weights used by all.
    const int groups = (n + 7) / 8;
    float c[GROUPS][4];
#pragma unroll
    for (int q = 0; q < GROUPS; ++q) c[q][0] = c[q][1] = c[q][2] = c[q][3] = 0.0f;
    pdl_enter();
    for (int b = tile.b_begin; b < tile.b_end; ++b) {
        decode_block<Q>(p, rows, k, tile.row0, b, mine, tile.lane);
        __syncwarp();
        const bool lane_has = 128 * b + 32 * t < k;
        uint4 w0[4], w8[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            w0[i] = mine[g * 16 + ordered_swizzle(g, 4 * t + i)];
            w8[i] = mine[(g + 8) * 16 + ordered_swizzle(g + 8, 4 * t + i)];
        }
#pragma unroll
        for (int q = 0; q < GROUPS; ++q) {
            if (q >= groups) break;
            const int tok = 8 * q + g;
            const bool has_x = tok < n && lane_has;
            const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)(tok < n ? tok : 0) * k) + 4 * t;
            uint4 xv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) xv[i] = has_x ? __ldg(xg + 16 * b + i) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int j = 0; j < 8; ++j) bf16_order_step(c[q], w0, w8, xv, j);
        }
        __syncwarp();
    }
#pragma unroll
    for (int q = 0; q < GROUPS; ++q) {
        if (q >= groups) break;
        // The previous group's partials are read by the first warp of each tile first.
        if (q > 0) __syncthreads();
        s_part[tile.warp][g][2 * t] = c[q][0];
        s_part[tile.warp][g][2 * t + 1] = c[q][1];
        s_part[tile.warp][g + 8][2 * t] = c[q][2];
        s_part[tile.warp][g + 8][2 * t + 1] = c[q][3];
        // The split's partials in order from 0.0f, times 1.0 (exact): bf16_order.cuh's total.
        tile.store(s_part, y + (i64)8 * q * ldy, rows, ldy, n - 8 * q, 1.0f);
    }
}

// grid = ceil(rows / (16 * 8 / SPLIT)), block = 256; n <= 8 (qgemv_ordered_*) or <= 64
// (qgemv_ordered_wide_*), k % 32 == 0.
#define ORDERED_QGEMV(TYPE, NAME, SPLIT)                                                           \
    extern "C" __global__ void __launch_bounds__(256) qgemv_ordered_##NAME##_s##SPLIT(             \
        const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,                 \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy, int n) {      \
        ordered_qgemv<TYPE, SPLIT, 1>(Planes{p0, p1, p2}, x, y, rows, k, ldy, n);                  \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) qgemv_ordered_wide_##NAME##_s##SPLIT(        \
        const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,                 \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy, int n) {      \
        ordered_qgemv<TYPE, SPLIT, 8>(Planes{p0, p1, p2}, x, y, rows, k, ldy, n);                  \
    }
#define ORDERED_QGEMVS(TYPE, NAME)                                                        \
    ORDERED_QGEMV(TYPE, NAME, 1) ORDERED_QGEMV(TYPE, NAME, 2) ORDERED_QGEMV(TYPE, NAME, 4) \
    ORDERED_QGEMV(TYPE, NAME, 8)
ORDERED_QGEMVS(Q4_0, q4_0)
ORDERED_QGEMVS(Q4_1, q4_1)
ORDERED_QGEMVS(Q5_0, q5_0)
ORDERED_QGEMVS(Q8_0, q8_0)
ORDERED_QGEMVS(Q4_K, q4_k)
ORDERED_QGEMVS(Q5_K, q5_k)
ORDERED_QGEMVS(Q6_K, q6_k)
ORDERED_QGEMVS(FP8, fp8)
