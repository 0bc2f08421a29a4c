// The core of the 128 x 128 tensor-core tiles that tile_mma.cu (dense bf16 products) and
// moe_tile.cu (the experts' products of large steps) share: how a stage of 128 weight rows and
// 128 token rows of one 128-element block of k sits in shared memory, and the mma steps a warp
// takes over it, in the order of bf16_order.cuh, so that either kernel's sums are those of the
// skinny products bit for bit.
//
// Thread block: 8 warps as 2 (weight rows) x 4 (tokens); a warp owns 64 weight rows x 32 tokens
// (4 x 4 mma tiles). A stage's smem row r < 128 is weight row r of the tile, row 128 + j token
// j, each 16 chunks of 16 bytes (8 bf16). A lane takes its fragments the way gemv_mma.cu takes
// them from memory (elements 32 u + 8 i .. + 7, u = lane % 4), as 16-byte words; the chunks of
// each row are XOR-swizzled so that those reads, and the copies' writes, hit distinct banks.
#pragma once
#include "common.cuh"
#include "bf16_order.cuh"
#include "cp_async.cuh"

#define TILE_WM 2
#define TILE_WN 4
#define TILE_BM (TILE_WM * 64)
#define TILE_BN (TILE_WN * 32)
#define TILE_STAGES 3
#define TILE_THREADS (TILE_WM * TILE_WN * 32)
#define TILE_STAGE_ROWS (TILE_BM + TILE_BN)
#define TILE_STAGE_CHUNKS (TILE_STAGE_ROWS * 16)

// Where 16-byte chunk `ch` (0..15) of smem row `r` lives: the 8 lanes of a quarter-warp read
// chunks 4 u + i of rows g, g + 1 (u = 0..3): bit 0 of the row and bit 3 of the chunk move
// them to 8 distinct bank groups.
__device__ __forceinline__ int tile_swizzle(int r, int ch) {
    return ch ^ ((((ch >> 3) & 1) << 1) | (r & 1));
}

__device__ __forceinline__ uint4* tile_chunk(uint4* stage, int r, int ch) {
    return stage + r * 16 + tile_swizzle(r, ch);
}

// A warp's place in the block and a lane's in the mma fragments.
struct TileWarp {
    int g, u, wm, wn;
    __device__ __forceinline__ TileWarp() {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        g = lane >> 2;
        u = lane & 3;
        wm = warp / TILE_WN;
        wn = warp % TILE_WN;
    }
    // The smem (tile) weight row of accumulator e (0..3) of m-tile mt, and its token column
    // in the tile (n-tile nt).
    __device__ __forceinline__ int row(int mt, int e) const { return wm * 64 + mt * 16 + g + (e >> 1) * 8; }
    __device__ __forceinline__ int token(int nt, int e) const { return wn * 32 + nt * 8 + 2 * u + (e & 1); }
};

// The warp's 4 x 4 tiles over one staged block, added to `part` in bf16_order's steps.
__device__ __forceinline__ void tile_block_mma(const uint4* s, const TileWarp& w,
                                               float (&part)[4][4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint4 a0[4], a8[4], xv[4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
            const int r = w.wm * 64 + mt * 16 + w.g;
            a0[mt] = s[r * 16 + tile_swizzle(r, 4 * w.u + i)];
            a8[mt] = s[(r + 8) * 16 + tile_swizzle(r + 8, 4 * w.u + i)];
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const int r = TILE_BM + w.wn * 32 + nt * 8 + w.g;
            xv[nt] = s[r * 16 + tile_swizzle(r, 4 * w.u + i)];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
                    bf16_order_mma(part[mt][nt], a0[mt], a8[mt], xv[nt], h);
    }
}

// The running part's sums and the total of the finished parts: SPLIT parts of the order are
// kept by folding the part into the total at each part's first block.
struct TileSums {
    float part[4][4][4], total[4][4][4];
    __device__ __forceinline__ TileSums() {
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[a][b][e] = total[a][b][e] = 0.0f;
    }
    __device__ __forceinline__ void fold() {
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    total[a][b][e] += part[a][b][e];
                    part[a][b][e] = 0.0f;
                }
    }
    // After the last block: the last non-empty part, then the empty ones (0.0f each, as the
    // skinny kernels add them).
    __device__ __forceinline__ void finish(int nb, int per_part, int split) {
        fold();
        for (int p = (nb + per_part - 1) / per_part; p < split; ++p) fold();
    }
};

// The block's sums over k's blocks through TILE_STAGES stages of shared memory (`smem`,
// dynamic, TILE_STAGES * TILE_STAGE_CHUNKS words). `stages` fills them: issue(slot, b) starts
// block b's copies into stage `slot` (cp.async, or loads into registers), land(slot) finishes
// what went through registers (decoding, stores) after the current block's products, so the
// loads fly meanwhile; the barrier at the next block's start publishes both.
template <class Stages>
__device__ __forceinline__ void tile_pipeline(uint4* smem, int k, int split, Stages& stages,
                                              const TileWarp& w, TileSums& sums) {
    const int nb = bf16_order_blocks(k);
    const int per_part = (nb + split - 1) / split;
#pragma unroll
    for (int s = 0; s < TILE_STAGES - 1; ++s) {
        if (s < nb) {
            stages.issue(smem + s * TILE_STAGE_CHUNKS, s);
            stages.land(smem + s * TILE_STAGE_CHUNKS);
        }
        cp_async_commit();
    }
    for (int b = 0; b < nb; ++b) {
        cp_async_wait<TILE_STAGES - 2>();
        __syncthreads();
        const int next = b + TILE_STAGES - 1;
        uint4* next_stage = smem + (next % TILE_STAGES) * TILE_STAGE_CHUNKS;
        if (next < nb) stages.issue(next_stage, next);
        cp_async_commit();
        if (b > 0 && b % per_part == 0) sums.fold();
        tile_block_mma(smem + (b % TILE_STAGES) * TILE_STAGE_CHUNKS, w, sums.part);
        if (next < nb) stages.land(next_stage);
    }
    cp_async_wait<0>();
    sums.finish(nb, per_part, split);
}
