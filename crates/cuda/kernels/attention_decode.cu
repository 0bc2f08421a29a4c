// Decode attention (one query token per sequence) over paged K/V: flash-decoding.
//
// Grid (num_kv_heads, num_seqs, num_splits): each block takes one KV head with its whole query
// group (GQA: the G query heads that share the KV head), so every K/V element is read once,
// and one contiguous split of the context. Within a block the split is walked in tiles:
//   1. scores of the tile's keys for the G heads (lanes split head_dim, 16-byte loads),
//   2. an online-softmax update per head (running max m and sum l, in log2 units),
//   3. the value rows weighted by the probabilities, accumulated in f32 registers.
// One split writes the normalised output directly; several write (acc, m, l) partials that
// `attention_decode_reduce` combines (a sequence whose context fills fewer splits than the
// launch has leaves the rest empty; one partial reduces to what a direct write gives). A sequence with ctx_len 0 (graph padding) writes zeros.
// With a sliding window w > 0 the query (at position ctx_len - 1) sees only keys
// ctx_len - w .. ctx_len - 1, and the splits divide just that range: pages wholly outside
// the window are never read. `scale_log2` is the score scale times log2(e).
//
// Cache layout per layer: [num_pages][num_kv_heads][page_size][HD] bf16. Sequence s owns the
// pages pages[page_offsets[s]..]: position p lives in page pages[page_offsets[s] + p / page_size].
#include "common.cuh"

#define DEC_THREADS 128
#define DEC_MAX_GROUP 8
#define DEC_ITERS 8

template <int HD>
struct DecodeShape {
    static constexpr int LPK = HD / 8;                          // lanes per key (8 dims each)
    static constexpr int KPW = 32 / LPK;                        // keys per warp step
    // Key loads in flight per thread; halved for head_dim 16, whose 16 keys per warp step
    // would otherwise make the score and reduction buffers outgrow static shared memory.
    static constexpr int ITERS = HD >= 32 ? DEC_ITERS : DEC_ITERS / 2;
    static constexpr int TILE = (DEC_THREADS / 32) * KPW * ITERS;  // keys per tile
    static constexpr int KG = DEC_THREADS / LPK;                // key groups in the PV phase
    static constexpr int KEYS_PER_GROUP = TILE / KG;
};

__device__ __forceinline__ const uint4* kv_row(const bf16* cache, const i32* table, int key,
                                               int page_size, int num_kv_heads, int kvh,
                                               int head_dim, int chunk) {
    const i64 page = table[key / page_size];
    const int offset = key % page_size;
    return reinterpret_cast<const uint4*>(
               cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim) +
           chunk;
}

template <int HD>
__device__ __forceinline__ void decode_attention(
    const bf16* __restrict__ q, const bf16* __restrict__ k_cache,
    const bf16* __restrict__ v_cache, const i32* __restrict__ pages, const i32* __restrict__ page_offsets,
    const i32* __restrict__ ctx_lens, const i32* __restrict__ q_rows, bf16* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, int num_kv_heads, int group,
    int page_size, float scale_log2, int window) {
    typedef DecodeShape<HD> S;
    __shared__ float s_scores[DEC_MAX_GROUP][S::TILE];
    __shared__ float s_m[DEC_MAX_GROUP], s_l[DEC_MAX_GROUP], s_corr[DEC_MAX_GROUP];
    __shared__ float s_red[S::KG][DEC_MAX_GROUP][HD];

    const int kvh = blockIdx.x, seq = blockIdx.y, split = blockIdx.z;
    const int num_splits = gridDim.z;
    const int num_heads = num_kv_heads * group;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int dl = tid % S::LPK;    // which 8 dims this thread handles
    const int sub = lane / S::LPK;  // which key of a warp step (QK phase)
    const int kg = tid / S::LPK;    // key group (PV phase)

    // The step's metadata is written by the host before the step, not by a kernel: read it
    // before waiting for the previous kernel (common.cuh); q and the K/V pages after.
    const int ctx = ctx_lens[seq];
    const int first_key = window > 0 ? max(0, ctx - window) : 0;
    // This sequence's splits: at most one per tile of keys, so that its partition depends on
    // its own context alone when the launch has MAX_SPLITS (the batch-invariant setting:
    // attention.rs); splits past them get no keys and write empty partials.
    const int seq_splits = max(1, min(num_splits, (ctx - first_key + S::TILE - 1) / S::TILE));
    const int per_split = (ctx - first_key + seq_splits - 1) / seq_splits;
    const int chunk = (per_split + S::TILE - 1) / S::TILE * S::TILE;
    const int start = first_key + split * chunk;
    const int end = min(ctx, start + chunk);
    const i32* table = pages + page_offsets[seq];
    const int q_row = q_rows[seq];
    pdl_enter();

    float qf[DEC_MAX_GROUP][8];
#pragma unroll
    for (int g = 0; g < DEC_MAX_GROUP; ++g) {
        if (g < group) {
            const uint4 raw = reinterpret_cast<const uint4*>(
                q + ((i64)q_row * num_heads + kvh * group + g) * HD)[dl];
            unpack8(raw, qf[g]);
#pragma unroll
            for (int e = 0; e < 8; ++e) qf[g][e] *= scale_log2;
        }
    }
    float acc[DEC_MAX_GROUP][8];
#pragma unroll
    for (int g = 0; g < DEC_MAX_GROUP; ++g)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
    if (tid < DEC_MAX_GROUP) {
        s_m[tid] = NEG_INF;
        s_l[tid] = 0.0f;
    }
    __syncthreads();

    for (int tile0 = start; tile0 < end; tile0 += S::TILE) {
        // 1. Scores: all K loads of the tile first, then the dot products. The tile's V loads
        // are issued here too, so that their latency overlaps the scores and the softmax
        // instead of following them (a decode step's context is a few tiles at most).
        uint4 kraw[S::ITERS];
#pragma unroll
        for (int it = 0; it < S::ITERS; ++it) {
            const int j = tile0 + (warp * S::ITERS + it) * S::KPW + sub;
            kraw[it] = j < end ? *kv_row(k_cache, table, j, page_size, num_kv_heads, kvh, HD, dl)
                               : make_uint4(0, 0, 0, 0);
        }
        uint4 vraw[S::KEYS_PER_GROUP];
#pragma unroll
        for (int i = 0; i < S::KEYS_PER_GROUP; ++i) {
            const int j = tile0 + kg + S::KG * i;
            vraw[i] = j < end ? *kv_row(v_cache, table, j, page_size, num_kv_heads, kvh, HD, dl)
                              : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int it = 0; it < S::ITERS; ++it) {
            const int jl = (warp * S::ITERS + it) * S::KPW + sub;
            float kf[8];
            unpack8(kraw[it], kf);
#pragma unroll
            for (int g = 0; g < DEC_MAX_GROUP; ++g) {
                if (g < group) {
                    float s = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; ++e) s += qf[g][e] * kf[e];
#pragma unroll
                    for (int o = S::LPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
                    if (dl == 0) s_scores[g][jl] = tile0 + jl < end ? s : NEG_INF;
                }
            }
        }
        __syncthreads();

        // 2. Online softmax, one warp per head.
        for (int g = warp; g < group; g += DEC_THREADS / 32) {
            float mx = NEG_INF;
            for (int j = lane; j < S::TILE; j += 32) mx = fmaxf(mx, s_scores[g][j]);
            mx = warp_max(mx);
            const float m_old = s_m[g];
            const float m_new = fmaxf(m_old, mx);  // finite: the tile has a valid key
            float sum = 0.0f;
            for (int j = lane; j < S::TILE; j += 32) {
                const float p = exp2f(s_scores[g][j] - m_new);
                s_scores[g][j] = p;
                sum += p;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float corr = exp2f(m_old - m_new);
                s_corr[g] = corr;
                s_l[g] = s_l[g] * corr + sum;
                s_m[g] = m_new;
            }
        }
        __syncthreads();

        // 3. Weighted values (loaded with the keys, above).
#pragma unroll
        for (int g = 0; g < DEC_MAX_GROUP; ++g) {
            if (g < group) {
                const float corr = s_corr[g];
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[g][e] *= corr;
            }
        }
#pragma unroll
        for (int i = 0; i < S::KEYS_PER_GROUP; ++i) {
            const int jl = kg + S::KG * i;
            float vf[8];
            unpack8(vraw[i], vf);
#pragma unroll
            for (int g = 0; g < DEC_MAX_GROUP; ++g) {
                if (g < group) {
                    const float p = s_scores[g][jl];  // 0 for keys past the end
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[g][e] += p * vf[e];
                }
            }
        }
        __syncthreads();
    }

    // Sum the key groups' partial accumulators.
#pragma unroll
    for (int g = 0; g < DEC_MAX_GROUP; ++g)
        if (g < group)
#pragma unroll
            for (int e = 0; e < 8; ++e) s_red[kg][g][dl * 8 + e] = acc[g][e];
    __syncthreads();
    for (int i = tid; i < group * HD; i += DEC_THREADS) {
        const int g = i / HD, d = i % HD;
        float total = 0.0f;
        for (int k = 0; k < S::KG; ++k) total += s_red[k][g][d];
        const int head = kvh * group + g;
        if (num_splits == 1) {
            const float l = s_l[g];
            out[((i64)q_row * num_heads + head) * HD + d] =
                __float2bfloat16_rn(l > 0.0f ? total / l : 0.0f);
        } else {
            const i64 part = ((i64)seq * num_heads + head) * num_splits + split;
            part_acc[part * HD + d] = total;
            if (d == 0) {
                part_ml[part * 2] = s_m[g];
                part_ml[part * 2 + 1] = s_l[g];
            }
        }
    }
}

#define DECODE_KERNEL(HD)                                                                     \
    extern "C" __global__ void __launch_bounds__(DEC_THREADS) attention_decode_hd##HD(         \
        const bf16* __restrict__ q, const bf16* __restrict__ k_cache,                         \
        const bf16* __restrict__ v_cache, const i32* __restrict__ pages, const i32* __restrict__ page_offsets,               \
        const i32* __restrict__ ctx_lens, const i32* __restrict__ q_rows,                     \
        bf16* __restrict__ out, float* __restrict__ part_acc, float* __restrict__ part_ml,    \
        int num_kv_heads, int group, int page_size, float scale_log2, int window) {           \
        decode_attention<HD>(q, k_cache, v_cache, pages, page_offsets, ctx_lens, q_rows, out, \
                             part_acc, part_ml, num_kv_heads, group, page_size, scale_log2,   \
                             window);                                                         \
    }
DECODE_KERNEL(16)
DECODE_KERNEL(32)
DECODE_KERNEL(64)
DECODE_KERNEL(128)
DECODE_KERNEL(256)

// Combines the splits: out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
// grid = (num_heads, num_seqs), block = head_dim threads.
extern "C" __global__ void attention_decode_reduce(const float* __restrict__ part_acc,
                                                   const float* __restrict__ part_ml,
                                                   const i32* __restrict__ q_rows,
                                                   bf16* __restrict__ out, int num_splits,
                                                   int head_dim) {
    pdl_enter();
    const int head = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
    const int num_heads = gridDim.x;
    const i64 first = ((i64)seq * num_heads + head) * num_splits;
    float m_max = NEG_INF;
    for (int s = 0; s < num_splits; ++s) m_max = fmaxf(m_max, part_ml[(first + s) * 2]);
    float num = 0.0f, den = 0.0f;
    if (m_max != NEG_INF) {
        for (int s = 0; s < num_splits; ++s) {
            const float m = part_ml[(first + s) * 2];
            if (m == NEG_INF) continue;
            const float w = exp2f(m - m_max);
            num += w * part_acc[(first + s) * head_dim + d];
            den += w * part_ml[(first + s) * 2 + 1];
        }
    }
    out[((i64)q_rows[seq] * num_heads + head) * head_dim + d] =
        __float2bfloat16_rn(den > 0.0f ? num / den : 0.0f);
}
