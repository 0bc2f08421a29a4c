// The mixture-of-experts MLP (qwen3_moe, qwen2_moe, mixtral), in four kernels that a decode
// graph can capture (every grid is fixed by the token count; no host ever reads the routing):
//
//   moe_route    router logits -> each token's k experts and weights (one warp a token)
//   moe_group    the n k choices sorted by expert (stable), and the work items: runs of at
//                most MOE_CHUNK rows of one expert (one block)
//   moe_experts  y[row] = W[expert of row] x[row] for every routed row: one launch for all the
//                experts, a grid row per work item (called for gate/up, then for down)
//   moe_combine  out[t] = sum over t's choices, in expert-id order, of weight * y[its row]
//                (+ sigmoid(shared gate) * the shared expert's output, qwen2_moe)
//
// The routing follows the CPU backend (crates/cpu/src/moe/routing.rs) and transformers: f32
// softmax over all experts, the k largest (ties to the lower id), optionally divided by their
// sum taken in rank order, then the choices sorted by expert id.
//
// moe_experts is gemv_mma.cu's skinny tensor-core product with an expert per work item: a
// warp takes 16 weight rows, the mma's 8 columns are the item's rows (tokens), and each
// weight is read once per item. A row's sum order depends on k and the split alone, never on
// how many other rows share its expert or step: a token's output does not depend on which
// other tokens were routed with it. k need only be a multiple of 8: the last 128-element
// block is zero-filled past k.
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

#define MOE_MAX_EXPERTS 256
#define MOE_MAX_K 8
#define MOE_CHUNK 8

// grid = ceil(n / 8), block = 256 (a warp per token). k <= MOE_MAX_K, experts <= 256.
extern "C" __global__ void __launch_bounds__(256)
    moe_route(const float* __restrict__ logits, int experts, int k, int normalize, int n,
              i32* __restrict__ ids, float* __restrict__ weights) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int tok = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (tok >= n) return;
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

// moe_route writes valid ids; clamped all the same, since an id indexes shared memory here.
__device__ __forceinline__ int expert_at(const i32* ids, int i, int experts) {
    return min(max(ids[i], 0), experts - 1);
}

// One block of 256 threads. `total` = n k choices (token-major). Writes each choice's row in
// the grouped order (rows of one expert together, by expert id, tokens in order inside), each
// row's token, and the work items (expert, first row, rows) padded with empty ones up to
// `max_items`; adds each expert's rows to `load` when it is not NULL (the expert-load metric).
extern "C" __global__ void __launch_bounds__(256)
    moe_group(const i32* __restrict__ ids, int total, int k, int experts,
              i32* __restrict__ row_of_choice, i32* __restrict__ token_of_row,
              int4* __restrict__ items, int max_items, u64* __restrict__ load) {
    __shared__ int s_count[MOE_MAX_EXPERTS];
    __shared__ int s_next[MOE_MAX_EXPERTS];
    __shared__ int s_item0[MOE_MAX_EXPERTS + 1];
    pdl_enter();
    const int tid = threadIdx.x, lane = tid & 31;
    for (int e = tid; e < experts; e += blockDim.x) s_count[e] = 0;
    __syncthreads();
    for (int i = tid; i < total; i += blockDim.x) atomicAdd(&s_count[expert_at(ids, i, experts)], 1);
    __syncthreads();
    if (tid == 0) {
        int row = 0, item = 0;
        for (int e = 0; e < experts; ++e) {
            s_next[e] = row;
            s_item0[e] = item;
            row += s_count[e];
            item += (s_count[e] + MOE_CHUNK - 1) / MOE_CHUNK;
        }
        s_item0[experts] = item;
    }
    __syncthreads();
    for (int e = tid; e < experts; e += blockDim.x) {
        const int c = s_count[e];
        for (int j = 0; j * MOE_CHUNK < c; ++j)
            items[s_item0[e] + j] =
                make_int4(e, s_next[e] + j * MOE_CHUNK, min(MOE_CHUNK, c - j * MOE_CHUNK), 0);
        if (load != nullptr && c > 0) atomicAdd(&load[e], (u64)c);
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

// One lane's words of one 128-element block: 32 weights of rows g and g + 8, and 32 x values
// (zero past k).
struct MoeLane {
    uint4 w0[4], w8[4], x[4];
};

// y[row0 + j, r] = sum_c W_e[r, c] x[row j of the item, c] for the item's rows j; W_e's rows
// below `split_row` come from `w_lo` ([experts, split_row, k]), the others from `w_hi`
// ([experts, rows - split_row, k]): gate and up are two stacks, one product. x's row of item
// row j is `x_rows[row0 + j]` when x_rows is not NULL (the token, for gate/up), else row0 + j.
template <int SPLIT>
__device__ __forceinline__ void moe_expert_product(
    const bf16* __restrict__ w_lo, const bf16* __restrict__ w_hi, int split_row,
    const bf16* __restrict__ x, const i32* __restrict__ x_rows, const int4* __restrict__ items,
    float* __restrict__ y, int rows, int k, int ldy) {
    __shared__ float s_part[8][16][8];  // [warp][row in tile][token]
    pdl_enter();
    const int4 item = items[blockIdx.y];
    const int expert = item.x, first = item.y, n = item.z;
    if (n == 0) return;  // uniform over the block
    const int nb = (k + 127) / 128;
    const SkinnyTile<SPLIT, 16> tile(nb);
    const int g = tile.g, t = tile.t, row0 = tile.row0;
    auto row_ptr = [&](int r) -> const uint4* {
        r = min(r, rows - 1);  // rows past the end read the last row and are not written
        const bf16* base = r < split_row
                               ? w_lo + ((i64)expert * split_row + r) * k
                               : w_hi + ((i64)expert * (rows - split_row) + r - split_row) * k;
        return reinterpret_cast<const uint4*>(base) + 4 * t;
    };
    const uint4* r0 = row_ptr(row0 + g);
    const uint4* r8 = row_ptr(row0 + g + 8);
    const bool has_x = g < n;
    const int x_row = has_x ? (x_rows != nullptr ? x_rows[first + g] : first + g) : 0;
    const uint4* xg = reinterpret_cast<const uint4*>(x + (i64)x_row * k) + 4 * t;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    // Word i of block b holds elements 128 b + 32 t + 8 i .. + 7 (whole words: k % 8 == 0).
    auto in_k = [&](int b, int i) { return 128 * b + 32 * t + 8 * i < k; };

    auto load = [&](MoeLane& l, int b) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = in_k(b, i);
            l.w0[i] = ok ? __ldcs(r0 + 16 * b + i) : zero;
            l.w8[i] = ok ? __ldcs(r8 + 16 * b + i) : zero;
            l.x[i] = ok && has_x ? __ldg(xg + 16 * b + i) : zero;
        }
    };
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    auto consume = [&](const MoeLane& l) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int i = j >> 1, lo = 2 * (j & 1);
            mma_bf16(c, word_of(l.w0[i], lo), word_of(l.w8[i], lo), word_of(l.w0[i], lo + 1),
                     word_of(l.w8[i], lo + 1), word_of(l.x[i], lo), word_of(l.x[i], lo + 1));
        }
    };
    MoeLane la, lb;
    const int b_begin = tile.b_begin, b_end = tile.b_end;
    if (b_begin < b_end) load(la, b_begin);
    for (int b = b_begin; b < b_end; b += 2) {
        if (b + 1 < b_end) load(lb, b + 1);
        consume(la);
        if (b + 1 >= b_end) break;
        if (b + 2 < b_end) load(la, b + 2);
        consume(lb);
    }
    s_part[tile.warp][g][2 * t] = c[0];
    s_part[tile.warp][g][2 * t + 1] = c[1];
    s_part[tile.warp][g + 8][2 * t] = c[2];
    s_part[tile.warp][g + 8][2 * t + 1] = c[3];
    tile.store(s_part, y + (i64)first * ldy, rows, ldy, n, 1.0f);
}

// grid = (ceil(rows / (16 * 8 / SPLIT)), max_items), block = 256 (8 warps).
#define MOE_EXPERTS_KERNEL(SPLIT)                                                              \
    extern "C" __global__ void __launch_bounds__(256) moe_experts_s##SPLIT(                    \
        const bf16* __restrict__ w_lo, const bf16* __restrict__ w_hi, int split_row,           \
        const bf16* __restrict__ x, const i32* __restrict__ x_rows,                            \
        const int4* __restrict__ items, float* __restrict__ y, int rows, int k, int ldy) {     \
        moe_expert_product<SPLIT>(w_lo, w_hi, split_row, x, x_rows, items, y, rows, k, ldy);   \
    }
MOE_EXPERTS_KERNEL(1)
MOE_EXPERTS_KERNEL(2)
MOE_EXPERTS_KERNEL(4)
MOE_EXPERTS_KERNEL(8)

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
