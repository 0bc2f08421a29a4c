// Decode attention (one query token per sequence) over paged K/V: flash-decoding.
//
// Grid (num_kv_heads, num_seqs, num_splits): each block takes one KV head with its whole query
// group (GQA: the G query heads that share the KV head), so every K/V element is read once,
// and one contiguous split of the context. Within a block the split is walked in tiles:
//   1. scores of the tile's keys for the G heads (lanes split head_dim, 16-byte loads),
//   2. an online-softmax update per head (running max m and sum l, in log2 units),
//   3. the value rows weighted by the probabilities, accumulated in f32 registers.
// K and V tiles arrive in shared memory by cp.async one tile ahead (two stages), and each
// tile's page ids are loaded a tile before that, so a block never waits on a page-table read
// and then a K/V read in series (with 256 sequences a step, waiting tile by tile kept the
// kernel far below the memory bandwidth: docs/performance.md, '2026-12-05 17:10-17:25 UTC,
// H100 80GB HBM3: decode attention at 256 streams').
// A sequence uses at most one split per tile of its context; the launch's splits past those
// exit at once. With one split the block writes the normalised output directly; with several
// each writes (acc, m, l) partials that `attention_decode_reduce` combines, over the
// sequence's own splits only (split 0 records how many in `seq_splits_out`). A sequence with
// ctx_len 0 (graph padding) writes zeros.
// With a sliding window w > 0 the query (at position ctx_len - 1) sees only keys
// ctx_len - w .. ctx_len - 1, and the splits divide just that range: pages wholly outside
// the window are never read. `scale_log2` is the score scale times log2(e). With `sinks`
// (gpt-oss: f32 [num_heads], else NULL) a head's denominator also gets its sink, once: where
// the output is written (common.cuh, sink_share).
//
// Cache layout per layer: [num_pages][num_kv_heads][page_size][HD] bf16. Sequence s owns the
// pages pages[page_offsets[s]..]: position p lives in page pages[page_offsets[s] + p / page_size].
#include "common.cuh"
#include "cp_async.cuh"

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
    // Staging: 16-byte chunks of a K (or V) tile per thread, and the keys between a thread's
    // chunks (a thread keeps one column of 8 dims).
    static constexpr int CHUNKS = TILE * LPK / DEC_THREADS;
    static constexpr int KEY_STEP = DEC_THREADS / LPK;
    // Dynamic shared memory: two stages of a K and a V tile, reused after the last tile for
    // the key groups' partial sums. The launcher (src/kernels/names.rs, decode_shared_bytes)
    // must agree.
    static constexpr int STAGE = TILE * HD;  // elements of one K or V tile
    static constexpr int RED_BYTES = KG * DEC_MAX_GROUP * HD * 4;
    static constexpr int SHARED_BYTES = 4 * STAGE * 2 > RED_BYTES ? 4 * STAGE * 2 : RED_BYTES;
};

// The page ids of the keys this thread stages in the tile from key `tile0` (-1 past `end`).
template <int HD>
__device__ __forceinline__ void tile_pages(int pg[DecodeShape<HD>::CHUNKS],
                                           const i32* __restrict__ table, int tile0, int end,
                                           int page_size, int page_shift, int tid) {
    typedef DecodeShape<HD> S;
#pragma unroll
    for (int i = 0; i < S::CHUNKS; ++i) {
        const int key = tile0 + tid / S::LPK + i * S::KEY_STEP;
        const int page = page_shift >= 0 ? key >> page_shift : key / page_size;
        pg[i] = key < end ? table[page] : -1;
    }
}

// Starts copying the K and V tile from key `tile0` into `ks` / `vs` ([TILE][HD], no padding:
// the readers' 16-byte accesses cover whole rows) as one copy group; keys past the end
// become zeros, so a masked key's zero probability meets a zero value.
template <int HD>
__device__ __forceinline__ void stage_kv(bf16* ks, bf16* vs, const bf16* __restrict__ k_cache,
                                         const bf16* __restrict__ v_cache,
                                         const int pg[DecodeShape<HD>::CHUNKS], int tile0,
                                         int num_kv_heads, int kvh, int page_size,
                                         int page_shift, int tid) {
    typedef DecodeShape<HD> S;
    const int col = tid % S::LPK;
#pragma unroll
    for (int i = 0; i < S::CHUNKS; ++i) {
        const int kl = tid / S::LPK + i * S::KEY_STEP;
        const int key = tile0 + kl;
        const int slot = page_shift >= 0 ? key & (page_size - 1) : key % page_size;
        const i64 at =
            pg[i] >= 0 ? (((i64)pg[i] * num_kv_heads + kvh) * page_size + slot) * HD + col * 8 : 0;
        const int bytes = pg[i] >= 0 ? 16 : 0;
        cp_async16(ks + kl * HD + col * 8, k_cache + at, bytes);
        cp_async16(vs + kl * HD + col * 8, v_cache + at, bytes);
    }
    cp_async_commit();
}

template <int HD>
__device__ __forceinline__ void decode_attention(
    const bf16* __restrict__ q, const bf16* __restrict__ k_cache,
    const bf16* __restrict__ v_cache, const i32* __restrict__ pages, const i32* __restrict__ page_offsets,
    const i32* __restrict__ ctx_lens, const i32* __restrict__ q_rows, bf16* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, i32* __restrict__ seq_splits_out,
    int num_kv_heads, int group, int page_size, float scale_log2, int window,
    const float* __restrict__ sinks) {
    typedef DecodeShape<HD> S;
    __shared__ float s_scores[DEC_MAX_GROUP][S::TILE];
    __shared__ float s_m[DEC_MAX_GROUP], s_l[DEC_MAX_GROUP], s_corr[DEC_MAX_GROUP];
    extern __shared__ __align__(16) unsigned char decode_smem[];
    bf16* stages = reinterpret_cast<bf16*>(decode_smem);  // [2][K tile, V tile]
    float(*s_red)[DEC_MAX_GROUP][HD] = reinterpret_cast<float(*)[DEC_MAX_GROUP][HD]>(decode_smem);

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
    // attention.rs); splits past them get no keys, write nothing and exit here (the
    // reduction reads only the seq_splits partials).
    const int seq_splits = max(1, min(num_splits, (ctx - first_key + S::TILE - 1) / S::TILE));
    if (split >= seq_splits) return;
    const int per_split = (ctx - first_key + seq_splits - 1) / seq_splits;
    const int chunk = (per_split + S::TILE - 1) / S::TILE * S::TILE;
    const int start = first_key + split * chunk;
    const int end = min(ctx, start + chunk);
    const i32* table = pages + page_offsets[seq];
    const int q_row = q_rows[seq];
    const int page_shift = (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
    int pg[S::CHUNKS];  // page ids of the next tile to stage (the page lists are metadata too)
    if (start < end) tile_pages<HD>(pg, table, start, end, page_size, page_shift, tid);
    pdl_enter();
    if (split == 0 && kvh == 0 && tid == 0) seq_splits_out[seq] = seq_splits;

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

    if (start < end) {
        stage_kv<HD>(stages, stages + S::STAGE, k_cache, v_cache, pg, start, num_kv_heads, kvh,
                     page_size, page_shift, tid);
        tile_pages<HD>(pg, table, start + S::TILE, end, page_size, page_shift, tid);
    }
    for (int tile0 = start, t = 0; tile0 < end; tile0 += S::TILE, ++t) {
        const bf16* ks = stages + (t & 1) * 2 * S::STAGE;
        const bf16* vs = ks + S::STAGE;
        // The next tile's copies start now (its page ids were read a tile ago), and the page
        // ids of the one after are read; then this tile's copies are waited for.
        if (tile0 + S::TILE < end) {
            bf16* next = stages + ((t + 1) & 1) * 2 * S::STAGE;
            stage_kv<HD>(next, next + S::STAGE, k_cache, v_cache, pg, tile0 + S::TILE,
                         num_kv_heads, kvh, page_size, page_shift, tid);
            tile_pages<HD>(pg, table, tile0 + 2 * S::TILE, end, page_size, page_shift, tid);
        } else {
            cp_async_commit();  // an empty group: one per tile, so the wait below stays exact
        }
        cp_async_wait<1>();
        __syncthreads();

        // 1. Scores.
#pragma unroll
        for (int it = 0; it < S::ITERS; ++it) {
            const int jl = (warp * S::ITERS + it) * S::KPW + sub;
            float kf[8];
            unpack8(reinterpret_cast<const uint4*>(ks + jl * HD)[dl], kf);
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

        // 3. Weighted values.
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
            unpack8(reinterpret_cast<const uint4*>(vs + jl * HD)[dl], vf);
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

    // Sum the key groups' partial accumulators (in the stages' memory: every copy has landed
    // and every thread is past its last read of a tile).
    cp_async_wait<0>();
    __syncthreads();
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
        if (seq_splits == 1) {
            const float l = s_l[g] + sink_share(sinks, head, s_m[g]);
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
        i32* __restrict__ seq_splits_out, int num_kv_heads, int group, int page_size,         \
        float scale_log2, int window, const float* __restrict__ sinks) {                      \
        decode_attention<HD>(q, k_cache, v_cache, pages, page_offsets, ctx_lens, q_rows, out, \
                             part_acc, part_ml, seq_splits_out, num_kv_heads, group,          \
                             page_size, scale_log2, window, sinks);                           \
    }
DECODE_KERNEL(16)
DECODE_KERNEL(32)
DECODE_KERNEL(64)
DECODE_KERNEL(128)
DECODE_KERNEL(256)

// Largest split count (attention.rs MAX_SPLITS).
#define DEC_MAX_SPLITS 32
// Most splits the reduction walks thread by thread (what batches of many sequences use).
#define SHORT_SPLITS 4

// Element d of a head's output from its `splits` partials, one split after the other.
__device__ __forceinline__ float combine_short(const float* __restrict__ part_acc,
                                               const float* __restrict__ part_ml, i64 first,
                                               int splits, int head_dim, int d,
                                               const float* __restrict__ sinks, int head) {
    float m_max = NEG_INF;
    for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, part_ml[(first + s) * 2]);
    float num = 0.0f, den = 0.0f;
    if (m_max != NEG_INF) {
        for (int s = 0; s < splits; ++s) {
            const float m = part_ml[(first + s) * 2];
            if (m == NEG_INF) continue;
            const float w = exp2f(m - m_max);
            num += w * part_acc[(first + s) * head_dim + d];
            den += w * part_ml[(first + s) * 2 + 1];
        }
        den += sink_share(sinks, head, m_max);
    }
    return den > 0.0f ? num / den : 0.0f;
}

// Combines a sequence's splits: out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s over the
// seq_splits[seq] splits the decode kernel used (a sequence of one split was written there).
// Up to SHORT_SPLITS splits each thread walks them (combine_short). More (one sequence's long
// context cut into up to 32 splits) make that a chain of L2 round trips, so the splits' (m, l)
// are staged in shared memory and their weights and denominator computed once, by thread 0 in
// split order, while each thread loads its value of every split at once; it then adds them in
// split order. Both are the same sums in the same order, so the same bits.
// grid = (num_heads, num_seqs), block = head_dim threads.
extern "C" __global__ void attention_decode_reduce(const float* __restrict__ part_acc,
                                                   const float* __restrict__ part_ml,
                                                   const i32* __restrict__ seq_splits,
                                                   const i32* __restrict__ q_rows,
                                                   bf16* __restrict__ out, int num_splits,
                                                   int head_dim,
                                                   const float* __restrict__ sinks) {
    __shared__ float s_m[DEC_MAX_SPLITS], s_l[DEC_MAX_SPLITS], s_w[DEC_MAX_SPLITS];
    __shared__ float s_den;
    pdl_enter();
    const int head = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
    const int splits = seq_splits[seq];
    if (splits == 1) return;
    const int num_heads = gridDim.x;
    const i64 first = ((i64)seq * num_heads + head) * num_splits;
    bf16* dst = out + ((i64)q_rows[seq] * num_heads + head) * head_dim + d;
    if (splits <= SHORT_SPLITS) {
        *dst = __float2bfloat16_rn(
            combine_short(part_acc, part_ml, first, splits, head_dim, d, sinks, head));
        return;
    }
    for (int s = d; s < splits; s += blockDim.x) {
        s_m[s] = part_ml[(first + s) * 2];
        s_l[s] = part_ml[(first + s) * 2 + 1];
    }
    float acc[DEC_MAX_SPLITS];
#pragma unroll
    for (int s = 0; s < DEC_MAX_SPLITS; ++s)
        acc[s] = s < splits ? part_acc[(first + s) * head_dim + d] : 0.0f;
    __syncthreads();
    if (d == 0) {
        float m_max = NEG_INF;
        for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, s_m[s]);
        float den = 0.0f;
        for (int s = 0; s < splits; ++s) {
            // An empty split (m = -inf) is left out (weight -1 marks it), as is every split
            // when all are empty.
            const bool used = m_max != NEG_INF && s_m[s] != NEG_INF;
            const float w = used ? exp2f(s_m[s] - m_max) : -1.0f;
            s_w[s] = w;
            if (used) den += w * s_l[s];
        }
        s_den = den + sink_share(sinks, head, m_max);
    }
    __syncthreads();
    float num = 0.0f;
#pragma unroll
    for (int s = 0; s < DEC_MAX_SPLITS; ++s) {
        if (s < splits && s_w[s] >= 0.0f) num += s_w[s] * acc[s];
    }
    const float den = s_den;
    *dst = __float2bfloat16_rn(den > 0.0f ? num / den : 0.0f);
}
