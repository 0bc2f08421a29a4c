// The mixture-of-experts MLP (qwen3_moe, qwen2_moe, mixtral, gpt-oss), in five kernels that
// a decode graph can capture (every grid is fixed by the token count; no host ever reads the
// routing):
//
//   moe_route        router logits (+ bias) -> each token's k experts and weights (a warp a
//                    token)
//   moe_group        the n k choices sorted by expert (stable) and the work items: runs of
//                    at most 8 (decode), 32 or 128 (prefill) rows of one expert
//   moe_gate_up_*    the experts' gate/up and activation, every expert in one launch
//   moe_down_*       the experts' down projection, the same way (both in moe_experts.cu)
//   moe_combine      out[t] = sum over t's choices, in expert-id order, of weight * y[its row]
//                    (+ sigmoid(shared gate) * the shared expert's output, qwen2_moe)
//
// The routing follows the CPU backend (crates/cpu/src/moe/routing.rs) and transformers: f32
// softmax over all experts, the k largest (ties to the lower id), optionally divided by their
// sum taken in rank order, then the choices sorted by expert id. (gpt-oss's softmax over its
// top-k logits is that with the division.)
#include "common.cuh"

#define MOE_MAX_EXPERTS 256
#define MOE_MAX_K 8

// One warp routes one token: writes its k experts (by id) and weights at ids/weights[tok k].
// k <= MOE_MAX_K, experts <= MOE_MAX_EXPERTS. `bias` (gpt-oss's router bias, f32 [experts])
// is added to the logits when not NULL.
__device__ __forceinline__ void route_token(const float* __restrict__ logits,
                                            const float* __restrict__ bias, int experts, int k,
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
        p[i] = e < experts ? row[e] + (bias != nullptr ? bias[e] : 0.0f) : NEG_INF;
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

// grid = ceil(n / 8), block = 256: a warp routes a token from its router logits (f32 [n,
// experts], + `bias` when not NULL) into ids / weights [n, k].
extern "C" __global__ void __launch_bounds__(256)
    moe_route(const float* __restrict__ logits, int experts, int k, int normalize, int n,
              i32* __restrict__ ids, float* __restrict__ weights, const float* __restrict__ bias) {
    pdl_enter();
    const int tok = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (tok < n) route_token(logits, bias, experts, k, normalize, tok, ids, weights);
}

#define GROUP_WARPS 32

// One block of 1024 threads groups the n k routed choices (ids [n, k], moe_route's): each
// choice's row in the grouped order (rows of one expert together, by expert id, choices in
// order inside), each row's token, and the work items (expert, first row, at most `chunk`
// rows) padded with empty ones up to `max_items`. When `load` is not NULL (the expert-load
// metric) each expert's rows are added to it, counting only tokens whose KV slot (`slots`,
// one per token) is not -1: a decode graph's padding rows are routed like the others but are
// no one's tokens.
//
// Each warp takes a contiguous run of the choices: it counts its run's choices per expert,
// the counts' prefix sums (over experts, then over warps within an expert) give each warp
// its first row per expert, and each warp places its run 32 choices at a time, lanes with
// the same expert taking consecutive rows: stable, and 32 runs at once (one warp walking
// 16,384 choices took most of a 4,096-token step's routing time).
extern "C" __global__ void __launch_bounds__(1024)
    moe_group(const i32* __restrict__ ids, int experts, int k, int n,
              i32* __restrict__ row_of_choice, i32* __restrict__ token_of_row,
              int4* __restrict__ items, int chunk, int max_items, const i32* __restrict__ slots,
              u64* __restrict__ load) {
    __shared__ int s_warp_next[GROUP_WARPS][MOE_MAX_EXPERTS];  // a run's count, then first row
    __shared__ int s_count[MOE_MAX_EXPERTS];
    __shared__ int s_real[MOE_MAX_EXPERTS];  // choices of tokens with a KV slot (not padding)
    __shared__ int s_next[MOE_MAX_EXPERTS];
    __shared__ int s_item0[MOE_MAX_EXPERTS + 1];
    pdl_enter();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int total = n * k;
    // Whole groups of 32 choices a warp.
    const int run = (total + 32 * GROUP_WARPS - 1) / (32 * GROUP_WARPS) * 32;
    const int begin = min(total, warp * run), end = min(total, begin + run);
    for (int i = tid; i < GROUP_WARPS * MOE_MAX_EXPERTS; i += blockDim.x)
        (&s_warp_next[0][0])[i] = 0;
    for (int e = tid; e < experts; e += blockDim.x) s_real[e] = 0;
    __syncthreads();
    for (int base = begin; base < end; base += 32) {
        const int i = base + lane;
        const bool valid = i < end;
        const int e = valid ? expert_at(ids, i, experts) : -1;
        const u32 peers = __match_any_sync(FULL_MASK, e);
        const u32 real = __ballot_sync(FULL_MASK, valid && load != nullptr && slots[i / k] >= 0);
        if (valid && lane == __ffs(peers) - 1) {
            s_warp_next[warp][e] += __popc(peers);
            if (load != nullptr) atomicAdd(&s_real[e], __popc(peers & real));
        }
        __syncwarp();
    }
    __syncthreads();
    for (int e = tid; e < experts; e += blockDim.x) {
        int c = 0;
        for (int w = 0; w < GROUP_WARPS; ++w) c += s_warp_next[w][e];
        s_count[e] = c;
    }
    __syncthreads();
    if (tid < 32) {
        // Exclusive prefix sums of the rows and items per expert, by one warp: each lane sums
        // a run of consecutive experts, a shuffle scan over the lanes gives each run's start,
        // then each lane writes its run's starts.
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
        // Each warp's first row of expert e: the earlier warps' rows of e come before.
        int row = s_next[e];
        for (int w = 0; w < GROUP_WARPS; ++w) {
            const int c = s_warp_next[w][e];
            s_warp_next[w][e] = row;
            row += c;
        }
        const int c = s_count[e];
        for (int j = 0; j * chunk < c; ++j)
            items[s_item0[e] + j] = make_int4(e, s_next[e] + j * chunk, min(chunk, c - j * chunk), 0);
        if (load != nullptr && s_real[e] > 0) atomicAdd(&load[e], (u64)s_real[e]);
    }
    for (int i = s_item0[experts] + tid; i < max_items; i += blockDim.x)
        items[i] = make_int4(0, 0, 0, 0);
    __syncthreads();
    for (int base = begin; base < end; base += 32) {
        const int i = base + lane;
        const bool valid = i < end;
        const int e = valid ? expert_at(ids, i, experts) : -1;
        const u32 peers = __match_any_sync(FULL_MASK, e);
        const int rank = __popc(peers & ((1u << lane) - 1u));
        const int pos = valid ? s_warp_next[warp][e] + rank : 0;
        __syncwarp();
        if (valid) {
            row_of_choice[i] = pos;
            token_of_row[pos] = i / k;
            if (lane == __ffs(peers) - 1) s_warp_next[warp][e] += __popc(peers);
        }
        __syncwarp();
    }
}

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
