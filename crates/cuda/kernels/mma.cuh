// Warp-level tensor-core products (`mma.sync.m16n8k16`, f32 sums) shared by the skinny
// products: quant_gemv_mma.cu, fp8_gemv_mma.cu and gemv_mma.cu.
//
// Fragments (PTX ISA, m16n8k16 with 16-bit inputs), lane = 4 g + t: A (16 x 16, row-major)
// a0 = (row g, k 2t..2t+1), a1 = (row g + 8, same k), a2 = (row g, k 2t+8..2t+9),
// a3 = (row g + 8, same k); B (16 x 8) b0 = (k 2t..2t+1, column g), b1 = (k 2t+8..2t+9,
// column g); C (16 x 8) c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g + 8, same).
#pragma once
#include "common.cuh"

__device__ __forceinline__ void mma_bf16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                         u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                        u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Where a warp of a skinny product (2..8 tokens as the mma's columns) works: its tile of
// TILE_ROWS rows (8 / SPLIT tiles per block of 8 warps), its share of k's NB blocks (SPLIT
// warps per tile, in order), and the lane's fragment coordinates g, t.
template <int SPLIT, int TILE_ROWS>
struct SkinnyTile {
    int lane, warp, g, t, row0, part, b_begin, b_end;
    __device__ __forceinline__ explicit SkinnyTile(int nb) {
        lane = threadIdx.x & 31;
        warp = threadIdx.x >> 5;
        g = lane >> 2;
        t = lane & 3;
        row0 = (blockIdx.x * (8 / SPLIT) + warp / SPLIT) * TILE_ROWS;
        part = warp % SPLIT;
        const int per_part = (nb + SPLIT - 1) / SPLIT;
        b_begin = part * per_part;
        b_end = min(nb, b_begin + per_part);
    }
    // Sums the tile's SPLIT partials (s_part[warp][row in tile][token], written by every warp)
    // in order and writes y[token, row] = sum * scale for the rows and tokens that exist. Every
    // thread of the block calls it (a barrier).
    __device__ __forceinline__ void store(float (*s_part)[TILE_ROWS][8], float* y, int rows,
                                          int ldy, int n, float scale) const {
        __syncthreads();
        if (part != 0) return;
#pragma unroll
        for (int i = 0; i < TILE_ROWS * 8 / 32; ++i) {
            const int pair = lane + 32 * i, r = pair >> 3, tok = pair & 7;
            float total = 0.0f;
#pragma unroll
            for (int s = 0; s < SPLIT; ++s) total += s_part[warp + s][r][tok];
            if (tok < n && row0 + r < rows) y[(i64)tok * ldy + row0 + r] = total * scale;
        }
    }
};
