// The experts' products of the mixture-of-experts MLP (moe.cu routes, groups and combines):
//
//   moe_gate_up_{FMT}  act[row] = act(W_gate[e] x + b_gate[e], W_up[e] x + b_up[e]) for every
//                      routed row, e its expert: one launch for all the experts, a grid row
//                      per work item; act SwiGLU, or gpt-oss's clamped SwiGLU
//   moe_down_{FMT}     y[row] = W_down[e] act[row] + b_down[e], the same way
//
// with the weights bf16, MXFP4 (mxfp4.cuh decodes them to bf16 in registers, exactly) or a
// GGUF block type (Q8_0, Q4_K, Q5_K, Q6_K: quant_pieces.cuh decodes them to the bf16 the
// loader would widen them to) -- FMT -- and the biases optional (gpt-oss has them, f32).
// These are gemv_mma.cu's skinny tensor-core product with an expert per work item: a warp
// takes 16 weight rows, the mma's columns are the item's rows (tokens, 8 per fragment), and
// each weight is read once per item. A row's sum
// order depends on k and the split alone, never on how many other rows share its expert or
// step: a token's output does not depend on which other tokens were routed with it. k need only
// be a multiple of 8 (of 32 for MXFP4 and Q8_0, 256 for the K-quants): the last 128-element
// block is zero-filled past k.
#define QUANT_EXACT_ROUNDING
#include "common.cuh"
#include "quant.cuh"
#include "quant_pieces.cuh"
#include "mma.cuh"
#include "mxfp4.cuh"
#include "expert_activation.cuh"

// A lane works on elements 128 b + 32 t .. + 31 of its rows in k-block b: for bf16 four
// 16-byte words, for MXFP4 exactly one block (16 code bytes and an exponent).
struct Bf16Rows {
    struct Raw {
        uint4 v[4];
    };
    const bf16* w;
    // Row r's first word of this lane.
    struct Row {
        const uint4* p;
    };
    __device__ __forceinline__ Row row(i64 r, int k, int t) const {
        return {reinterpret_cast<const uint4*>(w + r * k) + 4 * t};
    }
    __device__ __forceinline__ static void load(Raw& raw, Row row, int b, bool ok) {
        const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 4; ++i) raw.v[i] = ok ? __ldcs(row.p + 16 * b + i) : zero;
    }
    __device__ __forceinline__ static void words(const Raw& raw, uint4 (&out)[4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = raw.v[i];
    }
};

struct Mxfp4Rows {
    struct Raw {
        uint4 qs;
        u32 e;
    };
    const uint4* qs;          // [blocks] 16 code bytes each
    const unsigned char* e;   // [blocks] exponents
    struct Row {
        const uint4* qs;
        const unsigned char* e;
    };
    __device__ __forceinline__ Row row(i64 r, int k, int t) const {
        const i64 block = r * (k / 32) + t;
        return {qs + block, e + block};
    }
    __device__ __forceinline__ static void load(Raw& raw, Row row, int b, bool ok) {
        raw.qs = ok ? __ldcs(row.qs + 4 * b) : make_uint4(0, 0, 0, 0);
        raw.e = ok ? (u32)__ldcs(row.e + 4 * b) : 127u;
    }
    __device__ __forceinline__ static void words(const Raw& raw, uint4 (&out)[4]) {
        mxfp4_words(raw.qs, raw.e, out);
    }
};

// GGUF block types: lane t's 32 elements of k-block b are piece 4 b + t of its row.
template <class P>
struct QuantRows {
    using Raw = typename P::Raw;
    Planes planes;
    struct Row {
        Planes p;
        int t;
    };
    __device__ __forceinline__ Row row(i64 r, int k, int t) const {
        return {P::at_row(planes, r, k), t};
    }
    __device__ __forceinline__ static void load(Raw& raw, const Row& row, int b, bool ok) {
        P::load(raw, row.p, 4 * b + row.t, ok);
    }
    __device__ __forceinline__ static void words(const Raw& raw, uint4 (&out)[4]) {
        P::words(raw, out);
    }
};

// One lane's operands of one k-block: tile rows g and g + 8 (raw), and 32 x values of each of
// its NF item rows g, g + 8, .. (zero past k and past the item's rows).
template <class W, int NF>
struct MoeLane {
    typename W::Raw w0, w8;
    uint4 x[NF][4];
};

// The item's product over k for its rows j = 8 f + g (f < NF), left in
// s_part[warp][tile row][j] for every warp: tile rows g and g + 8 are `r0` and `r8`, item row
// 8 f + g is read from `xg[f]` (uint4 pointers at this lane's first word) when it exists
// (f < nx). Each output's sum order depends on k and SPLIT alone, not on NF or the item's size
// (an mma column's sums do not depend on the other columns). A barrier ends it.
template <class W, int SPLIT, int NF>
__device__ __forceinline__ void moe_tile_product(const SkinnyTile<SPLIT, 16>& tile,
                                                 typename W::Row r0, typename W::Row r8,
                                                 const uint4* const (&xg)[NF], int nx, int k,
                                                 float (*s_part)[16][8 * NF]) {
    const int g = tile.g, t = tile.t;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto load = [&](MoeLane<W, NF>& l, int b) {
        const bool ok = 128 * b + 32 * t < k;
        W::load(l.w0, r0, b, ok);
        W::load(l.w8, r8, b, ok);
        // Word i holds elements 128 b + 32 t + 8 i .. + 7 (whole words: k % 8 == 0).
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool in = 128 * b + 32 * t + 8 * i < k;
#pragma unroll
            for (int f = 0; f < NF; ++f) l.x[f][i] = in && f < nx ? __ldg(xg[f] + 16 * b + i) : zero;
        }
    };
    float c[NF][4];
#pragma unroll
    for (int f = 0; f < NF; ++f) c[f][0] = c[f][1] = c[f][2] = c[f][3] = 0.0f;
    auto consume = [&](const MoeLane<W, NF>& l) {
        uint4 w0[4], w8[4];
        W::words(l.w0, w0);
        W::words(l.w8, w8);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int i = j >> 1, lo = 2 * (j & 1);
#pragma unroll
            for (int f = 0; f < NF; ++f)
                mma_bf16(c[f], word_of(w0[i], lo), word_of(w8[i], lo), word_of(w0[i], lo + 1),
                         word_of(w8[i], lo + 1), word_of(l.x[f][i], lo),
                         word_of(l.x[f][i], lo + 1));
        }
    };
    const int b_begin = tile.b_begin, b_end = tile.b_end;
    if constexpr (NF == 1) {
        // Two blocks' words in registers, ping-ponged: one multiplied while the other's fly.
        MoeLane<W, NF> la, lb;
        if (b_begin < b_end) load(la, b_begin);
        for (int b = b_begin; b < b_end; b += 2) {
            if (b + 1 < b_end) load(lb, b + 1);
            consume(la);
            if (b + 1 >= b_end) break;
            if (b + 2 < b_end) load(la, b + 2);
            consume(lb);
        }
    } else {
        // Four fragments' words fill the registers: one block at a time, the other warps on
        // the SM hide the loads.
        MoeLane<W, NF> l;
        for (int b = b_begin; b < b_end; ++b) {
            load(l, b);
            consume(l);
        }
    }
#pragma unroll
    for (int f = 0; f < NF; ++f) {
        s_part[tile.warp][g][8 * f + 2 * t] = c[f][0];
        s_part[tile.warp][g][8 * f + 2 * t + 1] = c[f][1];
        s_part[tile.warp][g + 8][8 * f + 2 * t] = c[f][2];
        s_part[tile.warp][g + 8][8 * f + 2 * t + 1] = c[f][3];
    }
    __syncthreads();
}

__device__ __forceinline__ const uint4* moe_x_row(const bf16* x, i64 row, int k, int t) {
    return reinterpret_cast<const uint4*>(x + row * k) + 4 * t;
}

// gate/up with the activation in the epilogue: a warp's tile is 8 intermediate columns
// i0 .. i0 + 7, its rows g < 8 the gate rows and g + 8 the up rows of column i0 + g, so the
// gate and up sums of column i meet in shared memory; then + the biases (f32 [experts, width],
// NULL without) and act[row j, i] = bf16(activation). `gate` and `up` are [experts, width, k];
// x's row of item row j is token_of_row[first + j]. An item has at most 8 NF rows.
template <class W, int SPLIT, int NF>
__device__ __forceinline__ void moe_gate_up(W gate, W up, int width, const bf16* __restrict__ x,
                                            const i32* __restrict__ token_of_row,
                                            const int4* __restrict__ items,
                                            bf16* __restrict__ act, int k,
                                            const float* __restrict__ gate_bias,
                                            const float* __restrict__ up_bias,
                                            ExpertActivation activation) {
    __shared__ float s_part[8][16][8 * NF];  // [warp][tile row][item row]
    pdl_enter();
    const int4 item = items[blockIdx.y];
    const int expert = item.x, first = item.y, n = item.z;
    if (n == 0) return;  // uniform over the block
    const SkinnyTile<SPLIT, 16> tile((k + 127) / 128);
    const int g = tile.g, t = tile.t, i0 = tile.row0 / 2;
    const i64 col = (i64)expert * width + min(i0 + g, width - 1);  // past the end: not written
    const uint4* xg[NF];
    int nx = 0;
#pragma unroll
    for (int f = 0; f < NF; ++f) {
        const int j = 8 * f + g;
        xg[f] = moe_x_row(x, j < n ? token_of_row[first + j] : 0, k, t);
        nx += j < n;
    }
    moe_tile_product<W, SPLIT, NF>(tile, gate.row(col, k, t), up.row(col, k, t), xg, nx, k,
                                   s_part);
    if (tile.part != 0) return;
#pragma unroll
    for (int i = 0; i < 2 * NF; ++i) {
        const int pair = tile.lane + 32 * i, c = pair / (8 * NF), j = pair % (8 * NF);
        float gv = 0.0f, uv = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) {
            gv += s_part[tile.warp + s][c][j];
            uv += s_part[tile.warp + s][c + 8][j];
        }
        if (j < n && i0 + c < width) {
            const i64 at = (i64)expert * width + i0 + c;
            if (gate_bias != nullptr) {
                gv += gate_bias[at];
                uv += up_bias[at];
            }
            act[(i64)(first + j) * width + i0 + c] = __float2bfloat16_rn(activation(gv, uv));
        }
    }
}

// down: y[first + j, r] = sum_c W_e[r, c] act[first + j, c] (+ bias[e, r], f32 [experts,
// rows], when not NULL), `down` [experts, rows, k].
template <class W, int SPLIT, int NF>
__device__ __forceinline__ void moe_down(W down, int rows, const bf16* __restrict__ act,
                                         const int4* __restrict__ items, float* __restrict__ y,
                                         int k, const float* __restrict__ bias) {
    __shared__ float s_part[8][16][8 * NF];
    pdl_enter();
    const int4 item = items[blockIdx.y];
    const int expert = item.x, first = item.y, n = item.z;
    if (n == 0) return;
    const SkinnyTile<SPLIT, 16> tile((k + 127) / 128);
    const int g = tile.g, t = tile.t, row0 = tile.row0;
    const i64 base = (i64)expert * rows;  // rows past the end read the last and are not written
    const uint4* xg[NF];
    int nx = 0;
#pragma unroll
    for (int f = 0; f < NF; ++f) {
        const int j = 8 * f + g;
        xg[f] = moe_x_row(act, j < n ? first + j : 0, k, t);
        nx += j < n;
    }
    moe_tile_product<W, SPLIT, NF>(tile, down.row(base + min(row0 + g, rows - 1), k, t),
                                   down.row(base + min(row0 + g + 8, rows - 1), k, t), xg, nx,
                                   k, s_part);
    if (tile.part != 0) return;
    float* out = y + (i64)first * rows;
#pragma unroll
    for (int i = 0; i < 4 * NF; ++i) {
        const int pair = tile.lane + 32 * i, r = pair / (8 * NF), j = pair % (8 * NF);
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) total += s_part[tile.warp + s][r][j];
        if (j < n && row0 + r < rows) {
            if (bias != nullptr) total += bias[base + row0 + r];
            out[(i64)j * rows + row0 + r] = total;
        }
    }
}

// Items of up to 8 (NF = 1, decode) or 32 rows (NF = 4, prefill: each weight read from L2 a
// quarter as often). gate/up: grid = (ceil(width / (8 * 8 / SPLIT)), max_items); down: grid =
// (ceil(rows / (16 * 8 / SPLIT)), max_items); block = 256 (8 warps). The `*_e` planes are
// a format's second plane: MXFP4's exponents, Q8_0's quants (its first plane is the scales),
// Q6_K's f16 scales (NULL for bf16, Q4_K and Q5_K).
#define MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, SPLIT, NF, ROWS)                                    \
    extern "C" __global__ void __launch_bounds__(256) moe_gate_up_##FMT##_s##SPLIT##_r##ROWS(    \
        const void* __restrict__ gate, const unsigned char* __restrict__ gate_e,               \
        const void* __restrict__ up, const unsigned char* __restrict__ up_e, int width,        \
        const bf16* __restrict__ x, const i32* __restrict__ token_of_row,                      \
        const int4* __restrict__ items, bf16* __restrict__ act, int k,                         \
        const float* __restrict__ gate_bias, const float* __restrict__ up_bias, int clamped,   \
        float alpha, float limit) {                                                            \
        moe_gate_up<W, SPLIT, NF>(WEIGHTS(gate, gate_e), WEIGHTS(up, up_e), width, x,          \
                                  token_of_row, items, act, k, gate_bias, up_bias,             \
                                  ExpertActivation{clamped, alpha, limit});                    \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) moe_down_##FMT##_s##SPLIT##_r##ROWS(       \
        const void* __restrict__ down, const unsigned char* __restrict__ down_e, int rows,     \
        const bf16* __restrict__ act, const int4* __restrict__ items, float* __restrict__ y,   \
        int k, const float* __restrict__ bias) {                                               \
        moe_down<W, SPLIT, NF>(WEIGHTS(down, down_e), rows, act, items, y, k, bias);           \
    }
#define BF16_WEIGHTS(values, exps) (Bf16Rows{reinterpret_cast<const bf16*>(values)})
#define MXFP4_WEIGHTS(values, exps) (Mxfp4Rows{reinterpret_cast<const uint4*>(values), exps})
#define MOE_PRODUCT_FORMAT(FMT, W, WEIGHTS)        \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 1, 1, 8)  \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 2, 1, 8)  \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 4, 1, 8)  \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 8, 1, 8)  \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 1, 4, 32) \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 2, 4, 32) \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 4, 4, 32) \
    MOE_PRODUCT_KERNELS(FMT, W, WEIGHTS, 8, 4, 32)
#define QUANT_WEIGHTS(PIECES, values, exps) \
    (QuantRows<PIECES>{Planes{reinterpret_cast<const unsigned char*>(values), exps, nullptr}})
#define Q8_0_WEIGHTS(values, exps) QUANT_WEIGHTS(Q8_0Pieces, values, exps)
#define Q4_K_WEIGHTS(values, exps) QUANT_WEIGHTS(Q4KPieces, values, exps)
#define Q5_K_WEIGHTS(values, exps) QUANT_WEIGHTS(Q5KPieces, values, exps)
#define Q6_K_WEIGHTS(values, exps) QUANT_WEIGHTS(Q6KPieces, values, exps)
MOE_PRODUCT_FORMAT(bf16, Bf16Rows, BF16_WEIGHTS)
MOE_PRODUCT_FORMAT(mxfp4, Mxfp4Rows, MXFP4_WEIGHTS)
MOE_PRODUCT_FORMAT(q8_0, QuantRows<Q8_0Pieces>, Q8_0_WEIGHTS)
MOE_PRODUCT_FORMAT(q4_k, QuantRows<Q4KPieces>, Q4_K_WEIGHTS)
MOE_PRODUCT_FORMAT(q5_k, QuantRows<Q5KPieces>, Q5_K_WEIGHTS)
MOE_PRODUCT_FORMAT(q6_k, QuantRows<Q6KPieces>, Q6_K_WEIGHTS)
