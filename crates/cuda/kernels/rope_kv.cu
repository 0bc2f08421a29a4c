// After the fused QKV projection: add the QKV bias (qwen2), rotate Q and K (RoPE), write the
// rotated Q as bf16 for attention, and store K and V into their KV-cache page slots.
//
// KV cache layout per layer: [num_pages][num_kv_heads][page_size][head_dim] bf16, so one KV
// head of one page is a contiguous page_size x head_dim block. A token's slot is
// page * page_size + offset; slot < 0 marks a padding token whose K/V are not stored.
#include "common.cuh"

// grid = (tokens, ceil((rotated pairs + kv_dim) / 128)), block = 128: one thread per rotated
// pair of a Q or K head, or per V element, so that even one token's work spreads over several
// multiprocessors (a decode step of batch 1 is one token).
// qkv rows are [q (num_heads*hd) | k (kv_heads*hd) | v (kv_heads*hd)].
// interleaved != 0 rotates pairs (2i, 2i+1), else (i, i + hd/2); inv_freq has hd/2 entries.
extern "C" __global__ void rope_kv_write(const float* __restrict__ qkv,
                                         const float* __restrict__ bias,
                                         const i32* __restrict__ positions,
                                         const i32* __restrict__ slots,
                                         const float* __restrict__ inv_freq,
                                         bf16* __restrict__ q_out, bf16* __restrict__ k_cache,
                                         bf16* __restrict__ v_cache, int num_heads,
                                         int num_kv_heads, int head_dim, int page_size,
                                         int interleaved) {
    const int t = blockIdx.x;
    const int half = head_dim / 2;
    const int q_dim = num_heads * head_dim, kv_dim = num_kv_heads * head_dim;
    const float* row = qkv + (i64)t * (q_dim + 2 * kv_dim);
    const float pos = (float)positions[t];
    const int slot = slots[t];
    const i64 page = slot >= 0 ? slot / page_size : 0;
    const int offset = slot >= 0 ? slot % page_size : 0;
    // Positions and slots are host-written step metadata: read before the wait (common.cuh).
    pdl_enter();

    // Rotated pairs of Q heads, then of K heads, then the V elements.
    const int pairs = (num_heads + num_kv_heads) * half;
    const int first = blockIdx.y * blockDim.x + threadIdx.x;
    const int stride = gridDim.y * blockDim.x;
    for (int p = first; p < pairs; p += stride) {
        const int head = p / half, i = p % half;
        const int a = interleaved ? 2 * i : i;
        const int b = interleaved ? 2 * i + 1 : i + half;
        const int base = head * head_dim;  // Q heads then K heads are contiguous in the row
        float xa = row[base + a], xb = row[base + b];
        if (bias) {
            xa += bias[base + a];
            xb += bias[base + b];
        }
        float s, c;
        sincosf(pos * inv_freq[i], &s, &c);
        const float ra = xa * c - xb * s;
        const float rb = xb * c + xa * s;
        if (head < num_heads) {
            bf16* q = q_out + (i64)t * q_dim + base;
            q[a] = __float2bfloat16_rn(ra);
            q[b] = __float2bfloat16_rn(rb);
        } else if (slot >= 0) {
            const int kvh = head - num_heads;
            bf16* k = k_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim;
            k[a] = __float2bfloat16_rn(ra);
            k[b] = __float2bfloat16_rn(rb);
        }
    }
    if (slot < 0) return;
    for (int e = first - pairs; e < kv_dim; e += stride) {
        if (e < 0) continue;
        const int kvh = e / head_dim, d = e % head_dim;
        float v = row[q_dim + kv_dim + e];
        if (bias) v += bias[q_dim + kv_dim + e];
        v_cache[((page * num_kv_heads + kvh) * page_size + offset) * head_dim + d] =
            __float2bfloat16_rn(v);
    }
}
