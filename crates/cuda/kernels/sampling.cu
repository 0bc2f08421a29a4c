// Next-token selection on the GPU, one block per logits row, so that only token ids cross to
// the host. Greedy rows take the argmax (ties: lowest id, as the host sampler). Other rows
// filter as the host sampler does (crates/engine/src/sampler.rs), in its order:
//   min-p: keep logit >= max + T ln(min_p);
//   top-k: keep the k largest of those (a radix select on the order-preserving bit pattern);
//   top-p: keep the smallest best-first set whose weight exp((l - max) / T) reaches
//          top_p of the kept total (a radix select on fixed-point mass, deterministic);
// then draw by Gumbel-max: argmax over kept tokens of l / T + G_i, with G_i = -ln(-ln u_i) and
// u_i from Philox keyed by the request's seed and counted by (token index, step counter).
// That is an exact draw from softmax(l / T) restricted to the kept set.
//
// One block per row reads a 150k-entry row at the speed of one multiprocessor, so the two
// common cases, greedy and plain temperature sampling (no top-k, top-p or min-p), whose
// draws are both an argmax, first run `sample_partial` over vocabulary chunks on many
// blocks; `sample_tokens` then only combines the chunk winners. Argmax with ties to the
// lowest id is associative, so the token is the same as the one-block scan's.
#include "philox.cuh"

#define SAMPLE_THREADS 1024
#define RADIX_BINS 2048
#define GREEDY_TEMPERATURE 1e-5f
#define PARTIAL_CHUNK 4096  // a multiple of 4: Philox draws four tokens' numbers at a time
#define PARTIAL_THREADS 256

struct SampleParams {
    float temperature;
    float top_p;
    float min_p;
    i32 top_k;
    u64 seed;
    u64 counter;
};

// Larger floats map to larger unsigned keys.
__device__ __forceinline__ u32 order_key(float f) {
    const u32 b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ void argmax_pair(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

// Block-wide argmax; every thread gets the winner (and its value in `win_v` if given).
// `sv`/`si` hold 32 entries.
__device__ int block_argmax(float v, int i, float* sv, int* si, float* win_v = nullptr) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, v, o);
        const int oi = __shfl_xor_sync(FULL_MASK, i, o);
        argmax_pair(v, i, ov, oi);
    }
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? sv[lane] : NEG_INF;
    i = lane < (int)(blockDim.x >> 5) ? si[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, v, o);
        const int oi = __shfl_xor_sync(FULL_MASK, i, o);
        argmax_pair(v, i, ov, oi);
    }
    if (win_v) *win_v = v;
    __syncthreads();
    return i;
}

// Exclusive prefix sum over the block of one u64 per thread; `warp_tot` holds 32 entries.
__device__ u64 block_exclusive_scan(u64 v, u64* warp_tot) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const u64 up = __shfl_up_sync(FULL_MASK, inc, o);
        if (lane >= o) inc += up;
    }
    if (lane == 31) warp_tot[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        u64 w = lane < (int)(blockDim.x >> 5) ? warp_tot[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const u64 up = __shfl_up_sync(FULL_MASK, w, o);
            if (lane >= o) w += up;
        }
        warp_tot[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const u64 before_warp = warp > 0 ? warp_tot[warp - 1] : 0;
    __syncthreads();
    return before_warp + inc - v;
}

struct SelectShared {
    u64 hist[RADIX_BINS];
    u64 warp_tot[32];
    u32 digit;
    u64 above;
};

// Fixed-point weight of a logit: exp((l - max) / T) in units of 2^-32.
__device__ __forceinline__ u64 mass_of(float l, float max, float inv_t) {
    return (u64)(__expf((l - max) * inv_t) * 4294967296.0f);
}

// The largest key K with measure({i : key_i >= K, key_i >= lo}) >= target, where the measure
// counts tokens (by_mass == 0) or sums their fixed-point weights.
__device__ u32 radix_select(const float* row, int vocab, u32 lo, int by_mass, float max,
                            float inv_t, u64 target, SelectShared* sh) {
    u32 prefix = 0;
    u64 above = 0;
    const int shifts[3] = {21, 10, 0};
    const int widths[3] = {11, 11, 10};
    for (int round = 0; round < 3; ++round) {
        const int shift = shifts[round], bits = widths[round];
        const int high = shift + bits;  // bits at and above `high` are already decided
        for (int b = threadIdx.x; b < RADIX_BINS; b += blockDim.x) sh->hist[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            const float l = row[i];
            const u32 key = order_key(l);
            const bool same_high = high >= 32 || (key >> high) == (prefix >> high);
            if (key >= lo && same_high) {
                const u32 digit = (key >> shift) & ((1u << bits) - 1);
                atomicAdd(&sh->hist[digit], by_mass ? mass_of(l, max, inv_t) : 1ull);
            }
        }
        __syncthreads();
        // Thread t owns digits (2047 - 2t) and (2046 - 2t): descending digit order.
        const int d_hi = RADIX_BINS - 1 - 2 * (int)threadIdx.x, d_lo = d_hi - 1;
        const u64 m_hi = sh->hist[d_hi], m_lo = sh->hist[d_lo];
        const u64 before = above + block_exclusive_scan(m_hi + m_lo, sh->warp_tot);
        if (before < target && before + m_hi >= target) {
            sh->digit = (u32)d_hi;
            sh->above = before;
        } else if (before + m_hi < target && before + m_hi + m_lo >= target) {
            sh->digit = (u32)d_lo;
            sh->above = before + m_hi;
        }
        __syncthreads();
        prefix |= sh->digit << shift;
        above = sh->above;
        __syncthreads();
    }
    return prefix;
}

// Temperature sampling from the whole vocabulary: a Gumbel-max argmax over every token.
__device__ __forceinline__ bool unfiltered(const SampleParams& p, int vocab) {
    return p.temperature >= GREEDY_TEMPERATURE && p.min_p <= 0.0f &&
           (p.top_k <= 0 || p.top_k >= vocab) && p.top_p >= 1.0f;
}

// The Gumbel perturbation of token i: -ln(-ln u_i), u_i = Philox(seed; i / 4, counter)[i % 4].
__device__ __forceinline__ float gumbel_of(const Philox4& rnd, int j) {
    return -logf(-logf(philox_uniform(rnd.v[j])));
}

// grid = (chunks of PARTIAL_CHUNK tokens, rows), block = PARTIAL_THREADS. For chunk c of row
// r, entry (r * chunks + c) of part_v/part_i gets the chunk's greedy winner at index 2e and,
// for unfiltered rows, its Gumbel-max winner at 2e + 1.
extern "C" __global__ void __launch_bounds__(PARTIAL_THREADS)
    sample_partial(const float* __restrict__ logits, const i32* __restrict__ rows,
                   const SampleParams* __restrict__ params, float* __restrict__ part_v,
                   i32* __restrict__ part_i, int vocab) {
    pdl_enter();
    __shared__ float sv[32];
    __shared__ int si[32];
    const int chunk = blockIdx.x, r = blockIdx.y;
    const float* row = logits + (i64)rows[r] * vocab;
    const SampleParams p = params[r];
    const bool draw = unfiltered(p, vocab);
    const float inv_t = draw ? 1.0f / p.temperature : 0.0f;
    const u32 k0 = (u32)p.seed, k1 = (u32)(p.seed >> 32);
    const u32 c1 = (u32)p.counter, c2 = (u32)(p.counter >> 32);
    const int end = min(vocab, (chunk + 1) * PARTIAL_CHUNK);
    float best = NEG_INF, drawn = NEG_INF;
    int best_i = 0x7fffffff, drawn_i = 0x7fffffff;
    for (int base = chunk * PARTIAL_CHUNK + threadIdx.x * 4; base < end;
         base += PARTIAL_THREADS * 4) {
        Philox4 rnd;
        if (draw) rnd = philox4x32_10((u32)(base >> 2), c1, c2, 0x53414d50u, k0, k1);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = base + j;
            if (i < end) {
                const float l = row[i];
                argmax_pair(best, best_i, l, i);
                if (draw) argmax_pair(drawn, drawn_i, l * inv_t + gumbel_of(rnd, j), i);
            }
        }
    }
    float greedy_v, drawn_v;
    const int greedy_winner = block_argmax(best, best_i, sv, si, &greedy_v);
    const int drawn_winner = block_argmax(drawn, drawn_i, sv, si, &drawn_v);
    if (threadIdx.x == 0) {
        const i64 e = ((i64)r * gridDim.x + chunk) * 2;
        part_v[e] = greedy_v;
        part_i[e] = greedy_winner;
        part_v[e + 1] = drawn_v;
        part_i[e + 1] = drawn_winner;
    }
}

// grid = rows to sample, block = SAMPLE_THREADS (radix_select needs exactly 2 bins per
// thread). Block b samples logits row rows[b] with params[b] into tokens[b].
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_tokens(const float* __restrict__ logits, const i32* __restrict__ rows,
                  const SampleParams* __restrict__ params, i32* __restrict__ tokens, int vocab,
                  const float* __restrict__ part_v, const i32* __restrict__ part_i, int chunks) {
    pdl_enter();
    __shared__ SelectShared sh;
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float s_scratch[32];
    const int r = blockIdx.x;
    const float* row = logits + (i64)rows[r] * vocab;
    const SampleParams p = params[r];

    const bool greedy = p.temperature < GREEDY_TEMPERATURE;
    if (chunks > 0 && (greedy || unfiltered(p, vocab))) {
        // Combine the chunk winners of sample_partial.
        const i64 first = (i64)r * chunks * 2;
        float v = NEG_INF, dv = NEG_INF;
        int i = 0x7fffffff, di = 0x7fffffff;
        for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
            argmax_pair(v, i, part_v[first + 2 * c], part_i[first + 2 * c]);
            argmax_pair(dv, di, part_v[first + 2 * c + 1], part_i[first + 2 * c + 1]);
        }
        const int arg = block_argmax(v, i, sv, si);
        const int chosen = block_argmax(dv, di, sv, si);
        if (threadIdx.x == 0) tokens[r] = greedy || chosen >= vocab ? arg : chosen;
        return;
    }
    float best = NEG_INF;
    int best_i = 0x7fffffff;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) argmax_pair(best, best_i, row[i], i);
    const int arg = block_argmax(best, best_i, sv, si);
    if (greedy) {
        if (threadIdx.x == 0) tokens[r] = arg;
        return;
    }
    const float max_logit = row[arg];
    const float inv_t = 1.0f / p.temperature;

    u32 lo = 0;
    if (p.min_p > 0.0f) lo = order_key(max_logit + p.temperature * logf(p.min_p));
    if (p.top_k > 0) {
        float count = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) count += order_key(row[i]) >= lo;
        count = block_sum(count, s_scratch);
        if ((float)p.top_k < count) {
            lo = max(lo, radix_select(row, vocab, lo, 0, max_logit, inv_t, (u64)p.top_k, &sh));
        }
    }
    if (p.top_p < 1.0f) {
        u64 total = 0;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            const float l = row[i];
            if (order_key(l) >= lo) total += mass_of(l, max_logit, inv_t);
        }
        const u64 all = block_exclusive_scan(total, sh.warp_tot) + total;
        __shared__ u64 s_total;
        if (threadIdx.x == blockDim.x - 1) s_total = all;
        __syncthreads();
        u64 target = (u64)((double)s_total * (double)p.top_p);
        if (target < 1) target = 1;
        lo = max(lo, radix_select(row, vocab, lo, 1, max_logit, inv_t, target, &sh));
    }

    const u32 k0 = (u32)p.seed, k1 = (u32)(p.seed >> 32);
    const u32 c1 = (u32)p.counter, c2 = (u32)(p.counter >> 32);
    best = NEG_INF;
    best_i = 0x7fffffff;
    for (int base = threadIdx.x * 4; base < vocab; base += blockDim.x * 4) {
        const Philox4 rnd = philox4x32_10((u32)(base >> 2), c1, c2, 0x53414d50u, k0, k1);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = base + j;
            if (i < vocab) {
                const float l = row[i];
                if (order_key(l) >= lo) {
                    argmax_pair(best, best_i, l * inv_t + gumbel_of(rnd, j), i);
                }
            }
        }
    }
    const int chosen = block_argmax(best, best_i, sv, si);
    if (threadIdx.x == 0) tokens[r] = chosen < vocab ? chosen : arg;
}

// Structured outputs: logits[rows[k], t] = -inf wherever bit t % 32 of word t / 32 of mask k is
// clear, before the sampling kernels run, so a forbidden token can never win (greedy, Gumbel-max
// or filtered alike). grid = (ceil(vocab / 256), masked rows), block = 256.
extern "C" __global__ void apply_token_mask(float* __restrict__ logits, const i32* __restrict__ rows,
                                            const u32* __restrict__ masks, int vocab, int words) {
    const int k = blockIdx.y, t = blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = rows[k];  // host-written: read before the wait (common.cuh)
    pdl_enter();
    if (t >= vocab) return;
    const u32 w = masks[(i64)k * words + t / 32];
    if (((w >> (t % 32)) & 1u) == 0u) logits[row * vocab + t] = NEG_INF;
}
