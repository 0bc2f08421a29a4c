// After the fused QKV projection: add the QKV bias (qwen2), rotate Q and K (RoPE), write the
// rotated Q as bf16 for attention, and store K and V into their KV-cache page slots.
//
// KV cache layout per layer: [num_pages][num_kv_heads][page_size][head_dim] bf16, so one KV
// head of one page is a contiguous page_size x head_dim block. A token's slot is
// page * page_size + offset; slot < 0 marks a padding token whose K/V are not stored.
#include "common.cuh"

// Two adjacent rotated pairs (i, i + 1) of one head: their elements as f32 from the row
// (plus bias), loaded as one float2 pair (i, i+1 | i+half, i+half+1) or one float4
// (interleaved: 2i .. 2i+3).
struct TwoPairs {
    float a0, a1, b0, b1;  // element a and b of pair i, then of pair i + 1
};

__device__ __forceinline__ TwoPairs load_two_pairs(const float* __restrict__ src, int i, int half,
                                                   bool interleaved) {
    if (interleaved) {
        const float4 v = *reinterpret_cast<const float4*>(src + 2 * i);
        return {v.x, v.z, v.y, v.w};
    }
    const float2 lo = *reinterpret_cast<const float2*>(src + i);
    const float2 hi = *reinterpret_cast<const float2*>(src + i + half);
    return {lo.x, lo.y, hi.x, hi.y};
}

// The same from a bf16 row (a prompt chunk's QKV rows, written bf16 by cuBLAS).
__device__ __forceinline__ TwoPairs load_two_pairs(const bf16* __restrict__ src, int i, int half,
                                                   bool interleaved) {
    if (interleaved) {
        const float4 v = load4_bf16(src + 2 * i);
        return {v.x, v.z, v.y, v.w};
    }
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(src + i));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(src + i + half));
    return {lo.x, lo.y, hi.x, hi.y};
}

// Four consecutive V elements.
__device__ __forceinline__ float4 load_four(const float* __restrict__ src) {
    return *reinterpret_cast<const float4*>(src);
}

__device__ __forceinline__ float4 load_four(const bf16* __restrict__ src) {
    return load4_bf16(src);
}

__device__ __forceinline__ void store_two_pairs(bf16* dst, int i, int half, bool interleaved,
                                                float ra0, float ra1, float rb0, float rb1) {
    if (interleaved) {
        __nv_bfloat162* d = reinterpret_cast<__nv_bfloat162*>(dst + 2 * i);
        d[0] = __floats2bfloat162_rn(ra0, rb0);
        d[1] = __floats2bfloat162_rn(ra1, rb1);
    } else {
        *reinterpret_cast<__nv_bfloat162*>(dst + i) = __floats2bfloat162_rn(ra0, ra1);
        *reinterpret_cast<__nv_bfloat162*>(dst + i + half) = __floats2bfloat162_rn(rb0, rb1);
    }
}

// grid = (tokens, ceil((rotated pairs / 2 + kv_dim / 4) / 128)), block = 128: one thread per two
// adjacent rotated pairs of a Q or K head, or per four V elements (vector loads and stores),
// so that even one token's work spreads over several multiprocessors (a decode step of batch 1
// is one token). head_dim % 4 == 0.
// qkv rows are [q (num_heads*hd) | k (kv_heads*hd) | v (kv_heads*hd) | ...], `row_stride`
// elements apart (gated attention's output gate follows v).
// RoPE turns the first `rotary_dim` dims of each head (all but with a partial rotary factor;
// rotary_dim % 4 == 0); the rest pass through. interleaved != 0 rotates pairs (2i, 2i+1), else
// (i, i + rotary_dim/2); inv_freq has rotary_dim/2 entries.
// T: f32 rows, or bf16 rows (rope_kv_write_bf16).
template <typename T>
__device__ __forceinline__ void rope_kv(const T* __restrict__ qkv, const float* __restrict__ bias,
                                        const i32* __restrict__ positions,
                                        const i32* __restrict__ slots,
                                        const float* __restrict__ inv_freq,
                                        bf16* __restrict__ q_out, bf16* __restrict__ k_cache,
                                        bf16* __restrict__ v_cache, int num_heads,
                                        int num_kv_heads, int head_dim, int rotary_dim,
                                        int row_stride, int page_size, int interleaved) {
    const int t = blockIdx.x;
    const int half = rotary_dim / 2;
    const int q_dim = num_heads * head_dim, kv_dim = num_kv_heads * head_dim;
    const T* row = qkv + (i64)t * row_stride;
    const float pos = (float)positions[t];
    const int slot = slots[t];
    const i64 page = slot >= 0 ? slot / page_size : 0;
    const int offset = slot >= 0 ? slot % page_size : 0;
    // Positions and slots are host-written step metadata: read before the wait (common.cuh).
    pdl_enter();

    // Pairs of rotated pairs of Q heads, then of K heads, then groups of four V elements.
    const int quads = (num_heads + num_kv_heads) * half / 2;
    const int first = blockIdx.y * blockDim.x + threadIdx.x;
    const int stride = gridDim.y * blockDim.x;
    for (int p = first; p < quads; p += stride) {
        const int head = p / (half / 2), i = 2 * (p % (half / 2));
        const int base = head * head_dim;  // Q heads then K heads are contiguous in the row
        TwoPairs x = load_two_pairs(row + base, i, half, interleaved);
        if (bias) {
            const TwoPairs b = load_two_pairs(bias + base, i, half, interleaved);
            x.a0 += b.a0;
            x.a1 += b.a1;
            x.b0 += b.b0;
            x.b1 += b.b1;
        }
        float s0, c0, s1, c1;
        sincosf(pos * inv_freq[i], &s0, &c0);
        sincosf(pos * inv_freq[i + 1], &s1, &c1);
        const float ra0 = x.a0 * c0 - x.b0 * s0, rb0 = x.b0 * c0 + x.a0 * s0;
        const float ra1 = x.a1 * c1 - x.b1 * s1, rb1 = x.b1 * c1 + x.a1 * s1;
        if (head < num_heads) {
            store_two_pairs(q_out + (i64)t * q_dim + base, i, half, interleaved, ra0, ra1, rb0, rb1);
        } else if (slot >= 0) {
            const int kvh = head - num_heads;
            bf16* k = k_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim;
            store_two_pairs(k, i, half, interleaved, ra0, ra1, rb0, rb1);
        }
    }
    // The dims RoPE leaves as they are, two at a time, of Q heads then K heads.
    const int pass = head_dim - rotary_dim;
    const int pass_pairs = (num_heads + num_kv_heads) * pass / 2;
    for (int p = first - quads; p < pass_pairs; p += stride) {
        if (p < 0) continue;
        const int head = p / (pass / 2), d = rotary_dim + 2 * (p % (pass / 2));
        const int base = head * head_dim;
        float2 x;
        if constexpr (sizeof(T) == 4) {
            x = *reinterpret_cast<const float2*>(row + base + d);
        } else {
            x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(row + base + d));
        }
        if (bias) {
            x.x += bias[base + d];
            x.y += bias[base + d + 1];
        }
        const __nv_bfloat162 v = __floats2bfloat162_rn(x.x, x.y);
        if (head < num_heads) {
            *reinterpret_cast<__nv_bfloat162*>(q_out + (i64)t * q_dim + base + d) = v;
        } else if (slot >= 0) {
            const int kvh = head - num_heads;
            *reinterpret_cast<__nv_bfloat162*>(
                k_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim + d) = v;
        }
    }
    if (slot < 0) return;
    for (int e4 = first - quads - pass_pairs; e4 < kv_dim / 4; e4 += stride) {
        if (e4 < 0) continue;
        const int e = 4 * e4, kvh = e / head_dim, d = e % head_dim;
        float4 v = load_four(row + q_dim + kv_dim + e);
        if (bias) {
            const float4 b = *reinterpret_cast<const float4*>(bias + q_dim + kv_dim + e);
            v.x += b.x;
            v.y += b.y;
            v.z += b.z;
            v.w += b.w;
        }
        __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(
            v_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim + d);
        dst[0] = __floats2bfloat162_rn(v.x, v.y);
        dst[1] = __floats2bfloat162_rn(v.z, v.w);
    }
}

#define ROPE_KV_ARGS                                                                          \
    const float *__restrict__ bias, const i32 *__restrict__ positions,                        \
        const i32 *__restrict__ slots, const float *__restrict__ inv_freq,                    \
        bf16 *__restrict__ q_out, bf16 *__restrict__ k_cache, bf16 *__restrict__ v_cache,     \
        int num_heads, int num_kv_heads, int head_dim, int rotary_dim, int row_stride,        \
        int page_size, int interleaved
#define ROPE_KV_PASS                                                                          \
    bias, positions, slots, inv_freq, q_out, k_cache, v_cache, num_heads, num_kv_heads,       \
        head_dim, rotary_dim, row_stride, page_size, interleaved

extern "C" __global__ void rope_kv_write(const float* __restrict__ qkv, ROPE_KV_ARGS) {
    rope_kv(qkv, ROPE_KV_PASS);
}

extern "C" __global__ void rope_kv_write_bf16(const bf16* __restrict__ qkv, ROPE_KV_ARGS) {
    rope_kv(qkv, ROPE_KV_PASS);
}
