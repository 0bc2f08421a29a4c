// The batch-invariant bf16 product for many tokens (prefill chunks, large decode batches):
// y[t, r] = sum_k W[r, k] x[t, k], W bf16 [rows, k], x bf16 [n, k], y f32 with row stride ldy;
// k % 32 == 0. Its sums follow bf16_order.cuh, as gemv_mma.cu's do, so a token's row is the
// same bit for bit whether it ran alone, in a decode batch of 8 or in a prefill chunk of 4,096.
// cuBLAS picks its algorithm (tiling, split-K) by the shape, so its sums depend on n: that is
// what this kernel replaces when batch invariance is on.
//
// A block computes 128 weight rows x 128 tokens (tile_core.cuh), the rows and tokens of one
// 128-element block of k at a time copied into shared memory, three blocks in flight
// (cp.async).
#include "tile_core.cuh"

// The copies of one block of k: the tile's weight rows and tokens, zeros past the ends.
struct DenseStages {
    const bf16* w;
    const bf16* x;
    int rows, n, k, row_base, tok_base;
    __device__ __forceinline__ void issue(uint4* s, int b) const {
#pragma unroll 4
        for (int c = threadIdx.x; c < TILE_STAGE_CHUNKS; c += TILE_THREADS) {
            const int r = c >> 4, ch = c & 15;
            const bool is_w = r < TILE_BM;
            const int src = is_w ? row_base + r : tok_base + r - TILE_BM;
            const int kk = 128 * b + 8 * ch;
            const bool ok = src < (is_w ? rows : n) && kk < k;
            const bf16* from = (is_w ? w : x) + (ok ? (i64)src * k + kk : 0);
            cp_async16(tile_chunk(s, r, ch), from, ok ? 16 : 0);
        }
    }
    __device__ __forceinline__ void land(uint4*) const {}
};

extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1)
    tile_mma_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y,
                  int rows, int k, int ldy, int n, int split) {
    extern __shared__ uint4 smem[];  // [stage][TILE_STAGE_ROWS][16 chunks]
    const int row_base = blockIdx.x * TILE_BM, tok_base = blockIdx.y * TILE_BN;
    pdl_enter();
    DenseStages stages{w, x, rows, n, k, row_base, tok_base};
    const TileWarp tw;
    TileSums sums;
    tile_pipeline(smem, k, split, stages, tw, sums);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int rr = row_base + tw.row(mt, e), tt = tok_base + tw.token(nt, e);
                if (rr < rows && tt < n) y[(i64)tt * ldy + rr] = sums.total[mt][nt][e];
            }
}
