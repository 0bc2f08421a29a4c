// The mixture-of-experts MLP (qwen3_moe, qwen2_moe, mixtral), in four kernels that a decode
// graph can capture (every grid is fixed by the token count; no host ever reads the routing):
//
//   moe_route_group  router logits -> each token's k experts and weights (a warp a token),
//                    then the n k choices sorted by expert (stable) and the work items: runs
//                    of at most 8 (decode) or 32 (prefill) rows of one expert (one block)
//   moe_gate_up      act[row] = SwiGLU(W_gate[e] x, W_up[e] x) for every routed row, e its
//                    expert: one launch for all the experts, a grid row per work item
//   moe_down         y[row] = W_down[e] act[row], the same way
//   moe_combine      out[t] = sum over t's choices, in expert-id order, of weight * y[its row]
//                    (+ sigmoid(shared gate) * the shared expert's output, qwen2_moe)
//
// The routing follows the CPU backend (crates/cpu/src/moe/routing.rs) and transformers: f32
// softmax over all experts, the k largest (ties to the lower id), optionally divided by their
// sum taken in rank order, then the choices sorted by expert id.
//
// The products are gemv_mma.cu's skinny tensor-core product with an expert per work item: a
// warp takes 16 weight rows, the mma's columns are the item's rows (tokens, 8 per fragment),
// and each weight is read once per item. A row's sum order depends on k and the split alone, never on
// how many other rows share its expert or step: a token's output does not depend on which
// other tokens were routed with it. k need only be a multiple of 8: the last 128-element
// block is zero-filled past k.
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

#define MOE_MAX_EXPERTS 256
#define MOE_MAX_K 8

// One warp routes one token: writes its k experts (by id) and weights at ids/weights[tok k].
// k <= MOE_MAX_K, experts <= MOE_MAX_EXPERTS.
__device__ __forceinline__ void route_token(const float* __restrict__ logits, int experts, int k,
                                            int normalize, int tok, i32* __restrict__ ids,
                                            float* __restrict__ weights) {
    const int lane = threadIdx.x & 31;
    const float* row = logits + (i64)tok * experts;
    constexpr int PER_LANE = MOE_MAX_EXPERTS / 32;
    float p[PER_LANE];
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        const int e = lane + 32 * i;
        p[i] = e < experts ? row[e] : NEG_INF;
        m = fmaxf(m, p[i]);
    }
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        const int e = lane + 32 * i;
        p[i] = e < experts ? expf(p[i] - m) : 0.0f;
        s += p[i];
    }
    s = warp_sum(s);
    // NaN (a padded graph row's stale input) becomes 0, so that k valid experts are chosen.
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        p[i] /= s;
        if (!(p[i] >= 0.0f)) p[i] = 0.0f;
    }

    // k rounds of a warp arg-max over the experts not yet taken.
    int chosen[MOE_MAX_K];
    float prob[MOE_MAX_K];
    u32 taken = 0;  // bit i: this lane's expert lane + 32 i is chosen
    for (int r = 0; r < k; ++r) {
        float best = -1.0f;
        int best_e = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
            const int e = lane + 32 * i;
            if (e < experts && !(taken >> i & 1u) && p[i] > best) {
                best = p[i];
                best_e = e;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(FULL_MASK, best, o);
            const int oe = __shfl_xor_sync(FULL_MASK, best_e, o);
            if (ob > best || (ob == best && oe < best_e)) {
                best = ob;
                best_e = oe;
            }
        }
        if ((best_e & 31) == lane) taken |= 1u << (best_e >> 5);
        chosen[r] = best_e;
        prob[r] = best;
    }
    if (lane != 0) return;
    if (normalize) {
        float total = 0.0f;  // in rank order, largest first, as torch sums the top-k values
        for (int r = 0; r < k; ++r) total += prob[r];
        for (int r = 0; r < k; ++r) prob[r] /= total;
    }
    // Sorted by expert id: the order the combine adds them in.
    for (int a = 1; a < k; ++a) {
        const int e = chosen[a];
        const float w = prob[a];
        int b = a - 1;
        while (b >= 0 && chosen[b] > e) {
            chosen[b + 1] = chosen[b];
            prob[b + 1] = prob[b];
            --b;
        }
        chosen[b + 1] = e;
        prob[b + 1] = w;
    }
    for (int r = 0; r < k; ++r) {
        ids[(i64)tok * k + r] = chosen[r];
        weights[(i64)tok * k + r] = prob[r];
    }
}

// route_token writes valid ids; clamped all the same, since an id indexes shared memory here.
__device__ __forceinline__ int expert_at(const i32* ids, int i, int experts) {
    return min(max(ids[i], 0), experts - 1);
}

// One block of 1024 threads: routes the n tokens (a warp per token, from their router logits
// f32 [n, experts]), then groups the n k choices: each choice's row in the grouped order (rows
// of one expert together, by expert id, tokens in order inside), each row's token, and the
// work items (expert, first row, at most `chunk` rows) padded with empty ones up to
// `max_items`. When `load` is not NULL (the expert-load metric) each expert's rows are added
// to it, counting only tokens whose KV slot (`slots`, one per token) is not -1: a decode
// graph's padding rows are routed like the others but are no one's tokens.
extern "C" __global__ void __launch_bounds__(1024)
    moe_route_group(const float* __restrict__ logits, int experts, int k, int normalize, int n,
                    i32* __restrict__ ids, float* __restrict__ weights,
                    i32* __restrict__ row_of_choice, i32* __restrict__ token_of_row,
                    int4* __restrict__ items, int chunk, int max_items,
                    const i32* __restrict__ slots, u64* __restrict__ load) {
    __shared__ int s_count[MOE_MAX_EXPERTS];
    __shared__ int s_real[MOE_MAX_EXPERTS];  // choices of tokens with a KV slot (not padding)
    __shared__ int s_next[MOE_MAX_EXPERTS];
    __shared__ int s_item0[MOE_MAX_EXPERTS + 1];
    pdl_enter();
    const int tid = threadIdx.x, lane = tid & 31;
    for (int tok = tid >> 5; tok < n; tok += blockDim.x >> 5) {
        route_token(logits, experts, k, normalize, tok, ids, weights);
        __syncwarp();
    }
    const int total = n * k;
    for (int e = tid; e < experts; e += blockDim.x) s_count[e] = s_real[e] = 0;
    __syncthreads();  // also: every token's ids are written
    for (int i = tid; i < total; i += blockDim.x) {
        const int e = expert_at(ids, i, experts);
        atomicAdd(&s_count[e], 1);
        if (load != nullptr && slots[i / k] >= 0) atomicAdd(&s_real[e], 1);
    }
    __syncthreads();
    if (tid < 32) {
        // Exclusive prefix sums of the rows and items per expert, by one warp: each lane sums
        // a run of consecutive experts, a shuffle scan over the lanes gives each run's start,
        // then each lane writes its run's starts (one thread walking 128 experts took most of
        // a decode step's routing time).
        constexpr int RUN = MOE_MAX_EXPERTS / 32;
        const int e0 = lane * RUN;
        int rows = 0, its = 0;
#pragma unroll
        for (int i = 0; i < RUN; ++i) {
            const int c = e0 + i < experts ? s_count[e0 + i] : 0;
            rows += c;
            its += (c + chunk - 1) / chunk;
        }
        int row = rows, item = its;  // inclusive scan over lanes
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int r = __shfl_up_sync(FULL_MASK, row, o), t = __shfl_up_sync(FULL_MASK, item, o);
            if (lane >= o) {
                row += r;
                item += t;
            }
        }
        row -= rows;  // exclusive: where this lane's run starts
        item -= its;
#pragma unroll
        for (int i = 0; i < RUN; ++i) {
            const int e = e0 + i;
            if (e < experts) {
                s_next[e] = row;
                s_item0[e] = item;
                row += s_count[e];
                item += (s_count[e] + chunk - 1) / chunk;
            }
        }
        if (lane == 31) s_item0[experts] = item;
    }
    __syncthreads();
    for (int e = tid; e < experts; e += blockDim.x) {
        const int c = s_count[e];
        for (int j = 0; j * chunk < c; ++j)
            items[s_item0[e] + j] = make_int4(e, s_next[e] + j * chunk, min(chunk, c - j * chunk), 0);
        if (load != nullptr && s_real[e] > 0) atomicAdd(&load[e], (u64)s_real[e]);
    }
    for (int i = s_item0[experts] + tid; i < max_items; i += blockDim.x)
        items[i] = make_int4(0, 0, 0, 0);
    __syncthreads();
    // Stable placement, 32 choices at a time in order: lanes with the same expert take
    // consecutive rows by lane.
    if (tid >= 32) return;
    for (int base = 0; base < total; base += 32) {
        const int i = base + lane;
        const bool valid = i < total;
        const int e = valid ? expert_at(ids, i, experts) : -1;
        const u32 peers = __match_any_sync(FULL_MASK, e);
        const int rank = __popc(peers & ((1u << lane) - 1u));
        const int pos = valid ? s_next[e] + rank : 0;
        __syncwarp();
        if (valid) {
            row_of_choice[i] = pos;
            token_of_row[pos] = i / k;
            if (lane == __ffs(peers) - 1) s_next[e] += __popc(peers);
        }
        __syncwarp();
    }
}

// One lane's words of one 128-element block: 32 weights of tile rows g and g + 8, and 32 x
// values of each of its NF item rows g, g + 8, .. (zero past k and past the item's rows).
template <int NF>
struct MoeLane {
    uint4 w0[4], w8[4], x[NF][4];
};

// The item's product over k for its rows j = 8 f + g (f < NF), left in
// s_part[warp][tile row][j] for every warp: tile rows g and g + 8 read from `r0` and `r8`
// (uint4 pointers at this lane's first word), item row 8 f + g from `xg[f]` when it exists
// (f < nx). Each output's sum order depends on k and SPLIT alone, not on NF or the item's size
// (an mma column's sums do not depend on the other columns). A barrier ends it.
template <int SPLIT, int NF>
__device__ __forceinline__ void moe_tile_product(const SkinnyTile<SPLIT, 16>& tile,
                                                 const uint4* r0, const uint4* r8,
                                                 const uint4* const (&xg)[NF], int nx, int k,
                                                 float (*s_part)[16][8 * NF]) {
    const int g = tile.g, t = tile.t;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    // Word i of block b holds elements 128 b + 32 t + 8 i .. + 7 (whole words: k % 8 == 0).
    auto load = [&](MoeLane<NF>& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = 128 * b + 32 * t + 8 * i < k;
            l.w0[i] = ok ? __ldcs(r0 + 16 * b + i) : zero;
            l.w8[i] = ok ? __ldcs(r8 + 16 * b + i) : zero;
#pragma unroll
            for (int f = 0; f < NF; ++f) l.x[f][i] = ok && f < nx ? __ldg(xg[f] + 16 * b + i) : zero;
        }
    };
    float c[NF][4];
#pragma unroll
    for (int f = 0; f < NF; ++f) c[f][0] = c[f][1] = c[f][2] = c[f][3] = 0.0f;
    auto consume = [&](const MoeLane<NF>& l) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int i = j >> 1, lo = 2 * (j & 1);
#pragma unroll
            for (int f = 0; f < NF; ++f)
                mma_bf16(c[f], word_of(l.w0[i], lo), word_of(l.w8[i], lo),
                         word_of(l.w0[i], lo + 1), word_of(l.w8[i], lo + 1),
                         word_of(l.x[f][i], lo), word_of(l.x[f][i], lo + 1));
        }
    };
    const int b_begin = tile.b_begin, b_end = tile.b_end;
    if constexpr (NF == 1) {
        // Two blocks' words in registers, ping-ponged: one multiplied while the other's fly.
        MoeLane<NF> la, lb;
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
        MoeLane<NF> l;
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

__device__ __forceinline__ const uint4* moe_row(const bf16* w, i64 row, int k, int t) {
    return reinterpret_cast<const uint4*>(w + row * k) + 4 * t;
}

// gate/up with SwiGLU in the epilogue: a warp's tile is 8 intermediate columns i0 .. i0 + 7,
// its rows g < 8 the gate rows and g + 8 the up rows of column i0 + g, so the gate and up sums
// of column i meet in shared memory and act[row j, i] = bf16(silu(gate) * up) (the dense
// path's gated_activation.cu formula). `gate` and `up` are [experts, width, k]; x's row of
// item row j is token_of_row[first + j]. An item has at most 8 NF rows.
template <int SPLIT, int NF>
__device__ __forceinline__ void moe_gate_up(const bf16* __restrict__ gate,
                                            const bf16* __restrict__ up, int width,
                                            const bf16* __restrict__ x,
                                            const i32* __restrict__ token_of_row,
                                            const int4* __restrict__ items,
                                            bf16* __restrict__ act, int k) {
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
        xg[f] = moe_row(x, j < n ? token_of_row[first + j] : 0, k, t);
        nx += j < n;
    }
    moe_tile_product<SPLIT, NF>(tile, moe_row(gate, col, k, t), moe_row(up, col, k, t), xg, nx,
                                k, s_part);
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
        if (j < n && i0 + c < width)
            act[(i64)(first + j) * width + i0 + c] =
                __float2bfloat16_rn(gv / (1.0f + __expf(-gv)) * uv);
    }
}

// down: y[first + j, r] = sum_c W_e[r, c] act[first + j, c], `down` [experts, rows, k].
template <int SPLIT, int NF>
__device__ __forceinline__ void moe_down(const bf16* __restrict__ down, int rows,
                                         const bf16* __restrict__ act,
                                         const int4* __restrict__ items, float* __restrict__ y,
                                         int k) {
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
        xg[f] = moe_row(act, j < n ? first + j : 0, k, t);
        nx += j < n;
    }
    moe_tile_product<SPLIT, NF>(tile, moe_row(down, base + min(row0 + g, rows - 1), k, t),
                                moe_row(down, base + min(row0 + g + 8, rows - 1), k, t), xg,
                                nx, k, s_part);
    if (tile.part != 0) return;
    float* out = y + (i64)first * rows;
#pragma unroll
    for (int i = 0; i < 4 * NF; ++i) {
        const int pair = tile.lane + 32 * i, r = pair / (8 * NF), j = pair % (8 * NF);
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) total += s_part[tile.warp + s][r][j];
        if (j < n && row0 + r < rows) out[(i64)j * rows + row0 + r] = total;
    }
}

// Items of up to 8 (NF = 1, decode) or 32 rows (NF = 4, prefill: each weight read from L2 a
// quarter as often). gate/up: grid = (ceil(width / (8 * 8 / SPLIT)), max_items); down: grid =
// (ceil(rows / (16 * 8 / SPLIT)), max_items); block = 256 (8 warps).
#define MOE_PRODUCT_KERNELS(SPLIT, NF, ROWS)                                                   \
    extern "C" __global__ void __launch_bounds__(256) moe_gate_up_s##SPLIT##_r##ROWS(          \
        const bf16* __restrict__ gate, const bf16* __restrict__ up, int width,                 \
        const bf16* __restrict__ x, const i32* __restrict__ token_of_row,                      \
        const int4* __restrict__ items, bf16* __restrict__ act, int k) {                       \
        moe_gate_up<SPLIT, NF>(gate, up, width, x, token_of_row, items, act, k);               \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) moe_down_s##SPLIT##_r##ROWS(             \
        const bf16* __restrict__ down, int rows, const bf16* __restrict__ act,                 \
        const int4* __restrict__ items, float* __restrict__ y, int k) {                        \
        moe_down<SPLIT, NF>(down, rows, act, items, y, k);                                     \
    }
MOE_PRODUCT_KERNELS(1, 1, 8)
MOE_PRODUCT_KERNELS(2, 1, 8)
MOE_PRODUCT_KERNELS(4, 1, 8)
MOE_PRODUCT_KERNELS(8, 1, 8)
MOE_PRODUCT_KERNELS(1, 4, 32)
MOE_PRODUCT_KERNELS(2, 4, 32)
MOE_PRODUCT_KERNELS(4, 4, 32)
MOE_PRODUCT_KERNELS(8, 4, 32)

// grid = (ceil(hidden / 4 / 256), n), block = 256; hidden % 4 == 0. `shared_out` ([n, hidden])
// and `shared_score` ([n]) are both NULL or both set.
extern "C" __global__ void __launch_bounds__(256)
    moe_combine(const float* __restrict__ ys, const i32* __restrict__ row_of_choice,
                const float* __restrict__ weights, int k, int hidden,
                const float* __restrict__ shared_out, const float* __restrict__ shared_score,
                float* __restrict__ out) {
    pdl_enter();
    const int t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * c >= hidden) return;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < k; ++s) {
        const i64 row = row_of_choice[(i64)t * k + s];
        const float w = weights[(i64)t * k + s];
        const float4 v = reinterpret_cast<const float4*>(ys + row * hidden)[c];
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
    }
    if (shared_out != nullptr) {
        const float scale = 1.0f / (1.0f + expf(-shared_score[t]));
        const float4 v = reinterpret_cast<const float4*>(shared_out + (i64)t * hidden)[c];
        acc.x += scale * v.x;
        acc.y += scale * v.y;
        acc.z += scale * v.z;
        acc.w += scale * v.w;
    }
    reinterpret_cast<float4*>(out + (i64)t * hidden)[c] = acc;
}
