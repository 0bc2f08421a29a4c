// Prefill attention for chunks of prompt tokens whose K/V (the cached prefix and the chunk
// itself) are already in the paged cache: causal flash attention on the tensor cores.
//
// Grid (num_kv_heads, row tiles, num_seqs), the last row tile first: under the causal mask a
// tile's work grows with its index, so the longest blocks start first and the short ones fill
// the tail. A block's rows are (token, head) pairs of one KV head's query group,
// row = token * group + g, so the K/V tiles it loads serve all G heads. Four warps own
// 16 * MT rows each (MT = 2 up to head_dim 128, FlashAttention-2's shape: every K and V
// fragment read from shared memory feeds two products; 1 for head_dim 256, for registers).
// Q waits in shared memory and its fragments are re-read per key tile (too many registers
// otherwise). Per key tile: S = Q K^T with mma.m16n8k16 (bf16 in, f32 accumulate), causal mask
// (only on tiles some row does not wholly see), online softmax in registers (log2 units), P
// re-packed as the A operand of O += P V, V read with ldmatrix.trans. K and V arrive by
// cp.async one tile ahead: the next K tile loads during the softmax and P V, the next V tile
// during the next S = Q K^T. A row's arithmetic does not depend on which block holds it, so
// chunked and whole prompts give the same bits.
// With a sliding window w > 0 a row at position p sees keys p - w < key <= p only, and the
// block starts at the key tile holding the first key its earliest row sees. `scale_log2` is the score scale times
// log2(e). With `sinks` (gpt-oss: f32 [num_heads], else NULL) each row's denominator also
// gets its head's sink (common.cuh, sink_share).
//
// Fragment layout of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16x8):  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
#include "common.cuh"
#include "cp_async.cuh"

#define PRE_THREADS 128

// A block's shape for head_dim HD; the launcher (src/kernels/attention.rs, prefill_tile) must
// agree. Keys per K/V tile: 64, or 32 for head_dim 256 (registers).
template <int HD>
struct PrefillTile {
    static constexpr int MT = HD <= 128 ? 2 : 1;
    static constexpr int ROWS = 64 * MT;
    static constexpr int KEYS = HD <= 128 ? 64 : 32;
    static constexpr int STRIDE = HD + 8;  // padded row: conflict-free ldmatrix
    // Q, K and V tiles, dynamic shared memory.
    static constexpr int SHARED_BYTES = (ROWS + 2 * KEYS) * STRIDE * 2;
};

__device__ __forceinline__ void mma_16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32& d0, u32& d1, u32& d2, u32& d3,
                                                  const void* smem) {
    const u32 addr = (u32)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4(u32& d0, u32& d1, u32& d2, u32& d3,
                                            const void* smem) {
    const u32 addr = (u32)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                 : "r"(addr));
}

// Starts loading the KEYS x HD tile of `cache` (one KV head's K or V) from key `kt` into
// `dst` (rows STRIDE apart) as one copy group; keys at or past `key_end` become zeros, which
// keeps the masked products finite. A tile past the end commits an empty group, so the
// groups stay one per tile.
// `page_shift` is log2(page_size) when that is a power of two (then no integer division in the
// address arithmetic, which would otherwise cost as many instructions as the tile's products),
// else -1.
template <int HD, int KEYS, int STRIDE, int THREADS>
__device__ __forceinline__ void stage_tile(bf16* dst, const bf16* __restrict__ cache,
                                           const i32* __restrict__ table, int kt, int key_end,
                                           int kvh, int num_kv_heads, int page_size,
                                           int page_shift, int tid) {
    static_assert(THREADS % (HD / 8) == 0, "a thread keeps one 16-byte column of the tile");
    if (kt < key_end) {
        const int ch = tid % (HD / 8);
        const i64 page_elems = (i64)num_kv_heads * page_size * HD;
        const bf16* head = cache + ((i64)kvh * page_size) * HD + ch * 8;
#pragma unroll
        for (int kr = tid / (HD / 8); kr < KEYS; kr += THREADS / (HD / 8)) {
            const int key = kt + kr;
            const bool valid = key < key_end;
            const bf16* src = cache;
            if (valid) {
                const int page = page_shift >= 0 ? key >> page_shift : key / page_size;
                const int slot = page_shift >= 0 ? key & (page_size - 1) : key % page_size;
                src = head + table[page] * page_elems + (i64)slot * HD;
            }
            cp_async16(dst + kr * STRIDE + ch * 8, src, valid ? 16 : 0);
        }
    }
    cp_async_commit();
}

// 2^x in one MUFU instruction (-inf -> 0; results below 2^-126 flush to zero).
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<u32*>(&v);
}

template <int HD>
__device__ __forceinline__ void prefill_attention(
    const bf16* __restrict__ q, const bf16* __restrict__ k_cache,
    const bf16* __restrict__ v_cache, const i32* __restrict__ pages, const i32* __restrict__ page_offsets,
    const i32* __restrict__ q_starts, const i32* __restrict__ q_lens,
    const i32* __restrict__ pos0s, bf16* __restrict__ out, int num_kv_heads, int group,
    int page_size, float scale_log2, int window, const float* __restrict__ sinks) {
    pdl_enter();
    using T = PrefillTile<HD>;
    constexpr int MT = T::MT, ROWS = T::ROWS, KEYS = T::KEYS, STRIDE = T::STRIDE;
    constexpr int KSTEPS = HD / 16;
    constexpr int NT_O = HD / 8;
    extern __shared__ __align__(16) unsigned char prefill_smem[];
    bf16* qs = reinterpret_cast<bf16*>(prefill_smem);  // [ROWS][STRIDE]
    bf16* ks = qs + ROWS * STRIDE;                       // [KEYS][STRIDE]
    bf16* vs = ks + KEYS * STRIDE;                       // [KEYS][STRIDE]

    const int kvh = blockIdx.x, tile = gridDim.y - 1 - blockIdx.y, seq = blockIdx.z;
    const int q_len = q_lens[seq];
    const int rows = q_len * group;
    if (tile * ROWS >= rows) return;
    const int q_start = q_starts[seq], pos0 = pos0s[seq];
    const int num_heads = num_kv_heads * group;
    const i32* table = pages + page_offsets[seq];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    // Row of this lane's accumulator half h of m-tile mt: (query row, position, Q offset).
    auto row_of = [&](int mt, int h) { return tile * ROWS + warp * 16 * MT + mt * 16 + g + 8 * h; };
    auto q_offset = [&](int r) {
        const int tok = r / group, head = kvh * group + r % group;
        return ((i64)(q_start + tok) * num_heads + head) * HD;
    };

    // The block's Q rows into shared memory (rows past the chunk: zeros), one copy group.
    for (int c = tid; c < ROWS * (HD / 8); c += PRE_THREADS) {
        const int rr = c / (HD / 8), ch = c % (HD / 8);
        const int r = tile * ROWS + rr;
        const bool valid = r < rows;
        cp_async16(qs + rr * STRIDE + ch * 8, valid ? q + q_offset(r) + ch * 8 : q, valid ? 16 : 0);
    }
    cp_async_commit();

    int pos[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row_of(mt, h);
            pos[mt][h] = r < rows ? pos0 + r / group : -1;  // -1 masks every key
        }

    float o[MT][NT_O][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < NT_O; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = NEG_INF, l[mt][0] = l[mt][1] = 0.0f;

    const int last_row = min(rows, (tile + 1) * ROWS) - 1;
    const int key_end = pos0 + last_row / group + 1;  // keys 0..key_end-1 are visible to some row
    // The first key tile the block's earliest row sees (0 without a window). Tiles start at
    // multiples of KEYS, wherever the chunk starts, so a row's sums are the same whether its
    // prompt came whole or in chunks (a tile a row sees nothing of leaves its sums alone).
    const int key_begin =
        window > 0 ? max(0, pos0 + tile * ROWS / group - window + 1) / KEYS * KEYS : 0;
    // Every real row sees keys up to its own position, so a tile wholly at or below the block's
    // earliest row position needs no mask (without a window).
    const int first_pos = pos0 + tile * ROWS / group;
    const int page_shift = (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
    auto stage = [&](bf16* dst, const bf16* cache, int kt) {
        stage_tile<HD, KEYS, STRIDE, PRE_THREADS>(dst, cache, table, kt, key_end, kvh,
                                                  num_kv_heads, page_size, page_shift, tid);
    };
    stage(ks, k_cache, key_begin);
    stage(vs, v_cache, key_begin);
    // This warp's Q fragment (m-tile mt, k-step kk) from shared memory: lanes 0-15 address
    // rows 0-15 at column kk*16, lanes 16-31 the same rows at kk*16 + 8 (a0..a3 in order).
    const bf16* q_frag = qs + (warp * 16 * MT + (lane & 15)) * STRIDE + (lane >> 4) * 8;
    for (int kt = key_begin; kt < key_end; kt += KEYS) {
        // In flight: [Q,] K(kt), V(kt). Wait for Q and K(kt).
        cp_async_wait<1>();
        __syncthreads();

        // S = Q K^T for 16 * MT rows x KEYS keys. The B fragments (8 keys x 16 dims, key-major
        // as ks stores them) come four 8x8 matrices at a time from ldmatrix: the 8 keys at
        // dims kk*16, +8, +16, +24, i.e. b0, b1 of step kk and of step kk + 1.
        float s[MT][KEYS / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
        if constexpr (KSTEPS == 1) {
            // head_dim 16: one k-step; lanes 16-31 load copies that go unused.
            u32 qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ldmatrix_x4(qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3], q_frag + mt * 16 * STRIDE);
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j) {
                u32 b0, b1, b2, b3;
                ldmatrix_x4(b0, b1, b2, b3, ks + (j * 8 + (lane & 7)) * STRIDE + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) mma_16816(s[mt][j], qa[mt], b0, b1);
            }
        } else {
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk += 2) {
                u32 qa[MT][2][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        ldmatrix_x4(qa[mt][e][0], qa[mt][e][1], qa[mt][e][2], qa[mt][e][3],
                                    q_frag + mt * 16 * STRIDE + (kk + e) * 16);
#pragma unroll
                for (int j = 0; j < KEYS / 8; ++j) {
                    u32 b0, b1, b2, b3;
                    ldmatrix_x4(b0, b1, b2, b3, ks + (j * 8 + (lane & 7)) * STRIDE + kk * 16 + (lane >> 3) * 8);
                    // Both m-tiles' first k-step, then both second ones: no product waits
                    // on the one just issued (same order per accumulator).
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) mma_16816(s[mt][j], qa[mt][0], b0, b1);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) mma_16816(s[mt][j], qa[mt][1], b2, b3);
                }
            }
        }
        // Every warp is done with ks: the next K tile loads during the softmax and P V.
        __syncthreads();
        stage(ks, k_cache, kt + KEYS);

        // Mask (only where some row does not see the whole tile), then the online softmax of
        // each of the lane's rows. Maxima are of raw scores (the scale is positive, so the
        // scaled maximum is the same number), and exp2(s * scale - max) is one FFMA and one
        // MUFU per score.
        const bool whole = window <= 0 && kt + KEYS - 1 <= first_pos;
        if (!whole) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < KEYS / 8; ++j)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int key = kt + j * 8 + 2 * t + (i & 1);
                        const int p = pos[mt][i >> 1];
                        if (key > p || (window > 0 && key <= p - window)) s[mt][j][i] = NEG_INF;
                    }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            // Two partial maxima and sums per row: shorter dependency chains.
            float tile_max[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}};
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    tile_max[i >> 1][j & 1] = fmaxf(tile_max[i >> 1][j & 1], s[mt][j][i]);
            float base[2], corr[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = fmaxf(tile_max[h][0], tile_max[h][1]);
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
                const float m_new = fmaxf(m[mt][h], mx * scale_log2);
                base[h] = m_new == NEG_INF ? 0.0f : m_new;  // a row with nothing visible yet
                corr[h] = exp2_approx(m[mt][h] - base[h]);
                m[mt][h] = m_new;
            }
            float tile_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int h = i >> 1;
                    s[mt][j][i] = exp2_approx(fmaf(s[mt][j][i], scale_log2, -base[h]));
                    tile_sum[h][j & 1] += s[mt][j][i];
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h)
                l[mt][h] = l[mt][h] * corr[h] + (tile_sum[h][0] + tile_sum[h][1]);
            // Once a row's maximum settles (most tiles of a long prompt) corr is exactly 1:
            // the warp skips the rescale when it is for all its rows.
            if (__any_sync(FULL_MASK, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
                for (int n = 0; n < NT_O; ++n) {
                    o[mt][n][0] *= corr[0];
                    o[mt][n][1] *= corr[0];
                    o[mt][n][2] *= corr[1];
                    o[mt][n][3] *= corr[1];
                }
            }
        }

        // In flight: V(kt), K(kt + KEYS). Wait for V(kt).
        cp_async_wait<1>();
        __syncthreads();

        // O += P V.
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; ++kk) {
            u32 pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                pa[mt][0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pa[mt][1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pa[mt][2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pa[mt][3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
            const int mi = lane >> 3, r = lane & 7;
#pragma unroll
            for (int np = 0; np < HD / 16; ++np) {
                u32 b0, b1, b2, b3;
                ldmatrix_x4_trans(b0, b1, b2, b3,
                                  vs + (kk * 16 + (mi & 1) * 8 + r) * STRIDE + np * 16 + (mi >> 1) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816(o[mt][2 * np], pa[mt], b0, b1);
                    mma_16816(o[mt][2 * np + 1], pa[mt], b2, b3);
                }
            }
        }
        // Every warp is done with vs: the next V tile loads during the next S = Q K^T.
        __syncthreads();
        stage(vs, v_cache, kt + KEYS);
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            l[mt][h] += __shfl_xor_sync(FULL_MASK, l[mt][h], 1);
            l[mt][h] += __shfl_xor_sync(FULL_MASK, l[mt][h], 2);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row_of(mt, h);
            if (r >= rows) continue;
            const float den = l[mt][h] + sink_share(sinks, kvh * group + r % group, m[mt][h]);
            const float inv = den > 0.0f ? 1.0f / den : 0.0f;
            bf16* dst = out + q_offset(r);
#pragma unroll
            for (int n = 0; n < NT_O; ++n) {
                *reinterpret_cast<u32*>(dst + n * 8 + 2 * t) =
                    pack_bf16x2(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
            }
        }
    }
}

#define PREFILL_KERNEL(HD)                                                                    \
    extern "C" __global__ void __launch_bounds__(PRE_THREADS) attention_prefill_hd##HD(        \
        const bf16* __restrict__ q, const bf16* __restrict__ k_cache,                         \
        const bf16* __restrict__ v_cache, const i32* __restrict__ pages, const i32* __restrict__ page_offsets,               \
        const i32* __restrict__ q_starts, const i32* __restrict__ q_lens,                     \
        const i32* __restrict__ pos0s, bf16* __restrict__ out, int num_kv_heads, int group,   \
        int page_size, float scale_log2, int window, const float* __restrict__ sinks) {       \
        prefill_attention<HD>(q, k_cache, v_cache, pages, page_offsets, q_starts, q_lens,     \
                              pos0s, out, num_kv_heads, group, page_size, scale_log2,         \
                              window, sinks);                                                 \
    }
PREFILL_KERNEL(16)
PREFILL_KERNEL(32)
PREFILL_KERNEL(64)
PREFILL_KERNEL(128)
PREFILL_KERNEL(256)
