// The batch-invariant bf16 product for many tokens (prefill chunks, large decode batches):
// y[t, r] = sum_k W[r, k] x[t, k], W bf16 [rows, k], x bf16 [n, k], y f32 with row stride ldy;
// k % 32 == 0. Its sums follow bf16_order.cuh, as gemv_mma.cu's do, so a token's row is the
// same bit for bit whether it ran alone, in a decode batch of 8 or in a prefill chunk of 4,096.
// cuBLAS picks its algorithm (tiling, split-K) by the shape, so its sums depend on n: that is
// what this kernel replaces when batch invariance is on.
//
// Thread block: 8 warps as 2 (rows) x 4 (tokens); a warp owns 64 weight rows x 32 tokens (4 x 4
// mma tiles); the block's 128 rows x 128 tokens of one 128-element block of k at a time pass
// through shared memory, three blocks in flight (cp.async). A lane takes its fragments the way
// gemv_mma.cu takes them from memory (elements 32 u + 8 i .. + 7, u = lane % 4), as 16-byte
// words; the 16-byte chunks of each smem row are XOR-swizzled so that those reads, and the
// copies' writes, hit distinct banks.
// The SPLIT parts of the order are kept by folding the running part into the total at each
// part's first block (`part` and `total` accumulators).
#include "common.cuh"
#include "bf16_order.cuh"
#include "cp_async.cuh"

#define TILE_WM 2
#define TILE_WN 4
#define TILE_BM (TILE_WM * 64)
#define TILE_BN (TILE_WN * 32)
#define TILE_STAGES 3
#define TILE_THREADS (TILE_WM * TILE_WN * 32)

// Where 16-byte chunk `ch` (0..15) of smem row `r` lives: the 8 lanes of a quarter-warp read
// chunks 4 u + i of rows g, g + 1 (u = 0..3): bit 0 of the row and bit 3 of the chunk move
// them to 8 distinct bank groups.
__device__ __forceinline__ int swizzle(int r, int ch) {
    return ch ^ ((((ch >> 3) & 1) << 1) | (r & 1));
}

extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1)
    tile_mma_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y,
                  int rows, int k, int ldy, int n, int split) {
    extern __shared__ uint4 smem[];  // [stage][BM + BN rows][16 chunks]
    constexpr int STAGE_ROWS = TILE_BM + TILE_BN;
    const int nb = bf16_order_blocks(k);
    const int per_part = (nb + split - 1) / split;
    const int row_base = blockIdx.x * TILE_BM, tok_base = blockIdx.y * TILE_BN;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, u = lane & 3;
    const int wm = warp / TILE_WN, wn = warp % TILE_WN;

    pdl_enter();
    auto load_block = [&](int stage, int b) {
        uint4* s = smem + stage * STAGE_ROWS * 16;
#pragma unroll 4
        for (int c = threadIdx.x; c < STAGE_ROWS * 16; c += TILE_THREADS) {
            const int r = c >> 4, ch = c & 15;
            const bool is_w = r < TILE_BM;
            const int src = is_w ? row_base + r : tok_base + r - TILE_BM;
            const int kk = 128 * b + 8 * ch;
            const bool ok = src < (is_w ? rows : n) && kk < k;
            const bf16* from = (is_w ? w : x) + (ok ? (i64)src * k + kk : 0);
            cp_async16(&s[r * 16 + swizzle(r, ch)], from, ok ? 16 : 0);
        }
    };

    float part[4][4][4], total[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[a][b][e] = total[a][b][e] = 0.0f;
    auto fold = [&]() {
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    total[a][b][e] += part[a][b][e];
                    part[a][b][e] = 0.0f;
                }
    };

#pragma unroll
    for (int s = 0; s < TILE_STAGES - 1; ++s) {
        if (s < nb) load_block(s, s);
        cp_async_commit();
    }
    for (int b = 0; b < nb; ++b) {
        cp_async_wait<TILE_STAGES - 2>();
        __syncthreads();
        const int next = b + TILE_STAGES - 1;
        if (next < nb) load_block(next % TILE_STAGES, next);
        cp_async_commit();
        if (b > 0 && b % per_part == 0) fold();
        const uint4* s = smem + (b % TILE_STAGES) * STAGE_ROWS * 16;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            uint4 a0[4], a8[4], xv[4];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                const int r = wm * 64 + mt * 16 + g;
                a0[mt] = s[r * 16 + swizzle(r, 4 * u + i)];
                a8[mt] = s[(r + 8) * 16 + swizzle(r + 8, 4 * u + i)];
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int r = TILE_BM + wn * 32 + nt * 8 + g;
                xv[nt] = s[r * 16 + swizzle(r, 4 * u + i)];
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
    cp_async_wait<0>();
    // The last non-empty part, then the empty ones (0.0f each, as gemv_mma.cu adds them).
    fold();
    for (int p = (nb + per_part - 1) / per_part; p < split; ++p) fold();

#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const int r = row_base + wm * 64 + mt * 16 + g;
            const int tok = tok_base + wn * 32 + nt * 8 + 2 * u;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int rr = r + (e >> 1) * 8, tt = tok + (e & 1);
                if (rr < rows && tt < n) y[(i64)tt * ldy + rr] = total[mt][nt][e];
            }
        }
}
