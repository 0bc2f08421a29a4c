// The batch-invariant product of 1..8 tokens on a quantized matrix (the GGUF types, FP8):
// y[t, r] = sum_k W[r, k] x[t, k] with W's values exactly what quant_dequant.cu writes (the
// host dequantizer's, rounded to bf16) and the sums in bf16_order.cuh's order. From 9 tokens a
// quantized matrix is dequantized into a bf16 scratch and multiplied by gemv_mma.cu or
// tile_mma.cu, which sum in the same order: so a token's row is the same whether it ran alone
// or batched. (quant_gemv.cu and quant_gemv_mma.cu, faster, sum raw integers run by run and
// scale afterwards: their rows differ from the dequantized product's in the last bits.)
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

template <class Q, int SPLIT>
__device__ __forceinline__ void ordered_qgemv(const Planes p, const bf16* __restrict__ x,
                                              float* __restrict__ y, int rows, int k, int ldy,
                                              int n) {
    __shared__ uint4 s_tile[8][16 * 16];  // [warp][row * 16 + chunk]
    __shared__ float s_part[8][16][8];
    const int nb = bf16_order_blocks(k);
    const SkinnyTile<SPLIT, 16> tile(nb);
    const int g = tile.g, t = tile.t;
    uint4* mine = s_tile[tile.warp];
    const bool has_x = g < n;
    const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)(has_x ? g : 0) * k) + 4 * t;
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    pdl_enter();
    for (int b = tile.b_begin; b < tile.b_end; ++b) {
        decode_block<Q>(p, rows, k, tile.row0, b, mine, tile.lane);
        __syncwarp();
        const bool lane_has = 128 * b + 32 * t < k;
        uint4 w0[4], w8[4], xv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            w0[i] = mine[g * 16 + ordered_swizzle(g, 4 * t + i)];
            w8[i] = mine[(g + 8) * 16 + ordered_swizzle(g + 8, 4 * t + i)];
            xv[i] = has_x && lane_has ? __ldg(xg + 16 * b + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) bf16_order_step(c, w0, w8, xv, j);
        __syncwarp();
    }
    s_part[tile.warp][g][2 * t] = c[0];
    s_part[tile.warp][g][2 * t + 1] = c[1];
    s_part[tile.warp][g + 8][2 * t] = c[2];
    s_part[tile.warp][g + 8][2 * t + 1] = c[3];
    // The split's partials in order from 0.0f, times 1.0 (exact): bf16_order.cuh's total.
    tile.store(s_part, y, rows, ldy, n, 1.0f);
}

// grid = ceil(rows / (16 * 8 / SPLIT)), block = 256; n <= 8, k % 32 == 0.
#define ORDERED_QGEMV(TYPE, NAME, SPLIT)                                                           \
    extern "C" __global__ void __launch_bounds__(256) qgemv_ordered_##NAME##_s##SPLIT(             \
        const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,                 \
        const bf16* __restrict__ x, float* __restrict__ y, int rows, int k, int ldy, int n) {      \
        ordered_qgemv<TYPE, SPLIT>(Planes{p0, p1, p2}, x, y, rows, k, ldy, n);                     \
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
