// The experts' products for large steps (prefill chunks), where an expert gets hundreds of
// rows: moe_experts.cu's gate/up and down over work items of up to 128 rows of one expert,
// a block computing 128 weight rows x one item in tile_core.cuh's tiles, so that a weight
// is read from memory once per 128 routed rows instead of once per 32, through shared memory.
//
//   moe_tile_gate_up_{FMT}  act[row] = act(W_gate[e] x + b_gate[e], W_up[e] x + b_up[e]);
//                           tile rows 16 m .. 16 m + 7 are the gate rows of 8 intermediate
//                           columns and 16 m + 8 .. + 15 their up rows, so a column's gate
//                           and up sums meet in one lane's accumulators (c0/c2, c1/c3)
//   moe_tile_down_{FMT}     y[row] = W_down[e] act[row] + b_down[e]
//
// Weights bf16 (copied by cp.async), MXFP4 or a GGUF block type (loaded into registers while
// the previous block's products run, decoded by mxfp4.cuh / quant_pieces.cuh to the bf16 the
// skinny kernels see and stored). The sums follow
// bf16_order.cuh with the skinny kernels' split (the launcher passes it), so every output is
// bit for bit the one moe_experts.cu gives, whatever the item size: a token's result does not
// depend on the step it ran in. grid = (tiles of the outputs, work items), block = 256,
// dynamic shared memory = tile_mma's three stages.
#define QUANT_EXACT_ROUNDING
#include "tile_core.cuh"
#include "mxfp4.cuh"
#include "quant_pieces.cuh"
#include "expert_activation.cuh"

// Which stack row tile row r (< 128) of a block reads; false past the stack's rows.
struct GateUpMap {  // tile row r: column col0 + 8 (r / 16) + r % 8 of gate (r % 16 < 8) or up
    i64 base;       // expert * width
    int col0, width;
    __device__ __forceinline__ bool at(int r, int& matrix, i64& row) const {
        const int col = col0 + 8 * (r >> 4) + (r & 7);
        matrix = (r >> 3) & 1;
        row = base + min(col, width - 1);
        return col < width;
    }
};
struct DownMap {  // tile row r: row row0 + r
    i64 base;     // expert * rows
    int row0, rows;
    __device__ __forceinline__ bool at(int r, int& matrix, i64& row) const {
        matrix = 0;
        row = base + min(row0 + r, rows - 1);
        return row0 + r < rows;
    }
};

// bf16 stacks: a block of k's 16 chunks of each tile row, by cp.async.
struct Bf16Stacks {
    const bf16 *w0, *w1;  // matrix 0 and 1 (selected, not indexed: no local-memory array)
    template <class Map>
    __device__ __forceinline__ void issue(uint4* s, int b, const Map& map, int k) {
#pragma unroll 4
        for (int c = threadIdx.x; c < TILE_BM * 16; c += TILE_THREADS) {
            const int r = c >> 4, ch = c & 15, kk = 128 * b + 8 * ch;
            int m;
            i64 row;
            const bool ok = map.at(r, m, row) && kk < k;
            cp_async16(tile_chunk(s, r, ch), (m ? w1 : w0) + (ok ? row * k + kk : 0), ok ? 16 : 0);
        }
    }
    __device__ __forceinline__ void land(uint4*) {}
};

// MXFP4 stacks: each thread loads two (tile row, MXFP4 block) pairs of the block of k into
// registers at issue and decodes them into the stage at land.
struct Mxfp4Stacks {
    const uint4 *qs0, *qs1;  // matrix 0's and 1's planes
    const unsigned char *e0, *e1;
    uint4 codes[2];
    u32 exps[2];
    template <class Map>
    __device__ __forceinline__ void issue(uint4*, int b, const Map& map, int k) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int p = threadIdx.x + TILE_THREADS * q, r = p >> 2, kb = 4 * b + (p & 3);
            int m;
            i64 row;
            const bool ok = map.at(r, m, row) && 32 * kb < k;
            const i64 block = row * (k / 32) + kb;
            codes[q] = ok ? __ldg((m ? qs1 : qs0) + block) : make_uint4(0, 0, 0, 0);
            exps[q] = ok ? (u32)__ldg((m ? e1 : e0) + block) : 127u;  // zeros past the ends
        }
    }
    __device__ __forceinline__ void land(uint4* s) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int p = threadIdx.x + TILE_THREADS * q, r = p >> 2, blk = p & 3;
            uint4 words[4];
            mxfp4_words(codes[q], exps[q], words);
#pragma unroll
            for (int i = 0; i < 4; ++i) *tile_chunk(s, r, 4 * blk + i) = words[i];
        }
    }
};

// GGUF block-type stacks (quant_pieces.cuh): as MXFP4's, two (tile row, 32-element piece)
// pairs a thread, loaded at issue and decoded into the stage at land.
template <class P>
struct QuantStacks {
    Planes m0, m1;  // matrix 0's and 1's planes
    typename P::Raw raw[2];
    template <class Map>
    __device__ __forceinline__ void issue(uint4*, int b, const Map& map, int k) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int p = threadIdx.x + TILE_THREADS * q, r = p >> 2, piece = 4 * b + (p & 3);
            int m;
            i64 row;
            const bool ok = map.at(r, m, row) && 32 * piece < k;
            P::load(raw[q], P::at_row(m ? m1 : m0, row, k), piece, ok);
        }
    }
    __device__ __forceinline__ void land(uint4* s) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int p = threadIdx.x + TILE_THREADS * q, r = p >> 2, blk = p & 3;
            uint4 words[4];
            P::words(raw[q], words);
#pragma unroll
            for (int i = 0; i < 4; ++i) *tile_chunk(s, r, 4 * blk + i) = words[i];
        }
    }
};

// A block's stages: the weights as W stores them, the item's rows of x (s_src[j]: x's row of
// item row j, -1 past the item) by cp.async.
template <class W, class Map>
struct ExpertStages {
    W weights;
    Map map;
    const bf16* x;
    const int* s_src;
    int k;
    __device__ __forceinline__ void issue(uint4* s, int b) {
        weights.issue(s, b, map, k);
#pragma unroll 4
        for (int c = threadIdx.x; c < TILE_BN * 16; c += TILE_THREADS) {
            const int j = c >> 4, ch = c & 15, kk = 128 * b + 8 * ch, src = s_src[j];
            const bool ok = src >= 0 && kk < k;
            cp_async16(tile_chunk(s, TILE_BM + j, ch), x + (ok ? (i64)src * k + kk : 0),
                       ok ? 16 : 0);
        }
    }
    __device__ __forceinline__ void land(uint4* s) { weights.land(s); }
};

// The item of this block (expert, first grouped row, rows) and x's row of each of its rows
// into s_src: token_of_row[first + j] for gate/up (x is the tokens), first + j for down (act
// is in grouped order). False when the item is empty (uniform over the block).
__device__ __forceinline__ bool tile_item(const int4* items, const i32* token_of_row,
                                          int* s_src, int4& item) {
    item = items[blockIdx.y];
    if (item.z == 0) return false;
    const int j = threadIdx.x;
    if (j < TILE_BN) s_src[j] = j >= item.z ? -1 : token_of_row ? token_of_row[item.y + j] : item.y + j;
    __syncthreads();
    return true;
}

template <class W>
__device__ __forceinline__ void moe_tile_gate_up(W w, int width, const bf16* __restrict__ x,
                                                 const i32* __restrict__ token_of_row,
                                                 const int4* __restrict__ items,
                                                 bf16* __restrict__ act, int k, int split,
                                                 const float* __restrict__ gate_bias,
                                                 const float* __restrict__ up_bias,
                                                 ExpertActivation activation) {
    extern __shared__ uint4 smem[];
    __shared__ int s_src[TILE_BN];
    pdl_enter();
    int4 item;
    if (!tile_item(items, token_of_row, s_src, item)) return;
    const int expert = item.x, first = item.y, n = item.z, col0 = blockIdx.x * (TILE_BM / 2);
    ExpertStages<W, GateUpMap> stages{w, {(i64)expert * width, col0, width}, x, s_src, k};
    const TileWarp tw;
    TileSums sums;
    tile_pipeline(smem, k, split, stages, tw, sums);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        const int col = col0 + 8 * (tw.wm * 4 + mt) + tw.g;
        if (col >= width) continue;
        const i64 at = (i64)expert * width + col;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int j = tw.token(nt, e);
                if (j >= n) continue;
                float gv = sums.total[mt][nt][e], uv = sums.total[mt][nt][e + 2];
                if (gate_bias != nullptr) {
                    gv += gate_bias[at];
                    uv += up_bias[at];
                }
                act[(i64)(first + j) * width + col] = __float2bfloat16_rn(activation(gv, uv));
            }
    }
}

template <class W>
__device__ __forceinline__ void moe_tile_down(W w, int rows, const bf16* __restrict__ act,
                                              const int4* __restrict__ items,
                                              float* __restrict__ y, int k, int split,
                                              const float* __restrict__ bias) {
    extern __shared__ uint4 smem[];
    __shared__ int s_src[TILE_BN];
    pdl_enter();
    int4 item;
    if (!tile_item(items, nullptr, s_src, item)) return;
    const int expert = item.x, first = item.y, n = item.z, row0 = blockIdx.x * TILE_BM;
    ExpertStages<W, DownMap> stages{w, {(i64)expert * rows, row0, rows}, act, s_src, k};
    const TileWarp tw;
    TileSums sums;
    tile_pipeline(smem, k, split, stages, tw, sums);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = row0 + tw.row(mt, e), j = tw.token(nt, e);
                if (r >= rows || j >= n) continue;
                float total = sums.total[mt][nt][e];
                if (bias != nullptr) total += bias[(i64)expert * rows + r];
                y[(i64)(first + j) * rows + r] = total;
            }
}

// The same parameters as moe_experts.cu's kernels, plus the split.
#define MOE_TILE_KERNELS(FMT, STACKS)                                                          \
    extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1) moe_tile_gate_up_##FMT(      \
        const void* __restrict__ gate, const unsigned char* __restrict__ gate_e,               \
        const void* __restrict__ up, const unsigned char* __restrict__ up_e, int width,        \
        const bf16* __restrict__ x, const i32* __restrict__ token_of_row,                      \
        const int4* __restrict__ items, bf16* __restrict__ act, int k,                         \
        const float* __restrict__ gate_bias, const float* __restrict__ up_bias, int clamped,   \
        float alpha, float limit, int split) {                                                 \
        moe_tile_gate_up(STACKS(gate, gate_e, up, up_e), width, x, token_of_row, items, act,   \
                         k, split, gate_bias, up_bias,                                         \
                         ExpertActivation{clamped, alpha, limit});                             \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1) moe_tile_down_##FMT(         \
        const void* __restrict__ down, const unsigned char* __restrict__ down_e, int rows,     \
        const bf16* __restrict__ act, const int4* __restrict__ items, float* __restrict__ y,   \
        int k, const float* __restrict__ bias, int split) {                                    \
        moe_tile_down(STACKS(down, down_e, down, down_e), rows, act, items, y, k, split,       \
                      bias);                                                                   \
    }
#define BF16_STACKS(a, a_e, b, b_e) \
    (Bf16Stacks{reinterpret_cast<const bf16*>(a), reinterpret_cast<const bf16*>(b)})
#define MXFP4_STACKS(a, a_e, b, b_e)                                                  \
    (Mxfp4Stacks{reinterpret_cast<const uint4*>(a), reinterpret_cast<const uint4*>(b), a_e, b_e})
#define QUANT_STACKS(PIECES, a, a_e, b, b_e)                                      \
    (QuantStacks<PIECES>{Planes{reinterpret_cast<const unsigned char*>(a), a_e, nullptr}, \
                         Planes{reinterpret_cast<const unsigned char*>(b), b_e, nullptr}})
#define Q8_0_STACKS(a, a_e, b, b_e) QUANT_STACKS(Q8_0Pieces, a, a_e, b, b_e)
#define Q4_K_STACKS(a, a_e, b, b_e) QUANT_STACKS(Q4KPieces, a, a_e, b, b_e)
#define Q5_K_STACKS(a, a_e, b, b_e) QUANT_STACKS(Q5KPieces, a, a_e, b, b_e)
#define Q6_K_STACKS(a, a_e, b, b_e) QUANT_STACKS(Q6KPieces, a, a_e, b, b_e)
MOE_TILE_KERNELS(bf16, BF16_STACKS)
MOE_TILE_KERNELS(mxfp4, MXFP4_STACKS)
MOE_TILE_KERNELS(q8_0, Q8_0_STACKS)
MOE_TILE_KERNELS(q4_k, Q4_K_STACKS)
MOE_TILE_KERNELS(q5_k, Q5_K_STACKS)
MOE_TILE_KERNELS(q6_k, Q6_K_STACKS)
