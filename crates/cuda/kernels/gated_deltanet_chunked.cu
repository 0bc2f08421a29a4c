// The gated delta rule of prompt chunks in the chunked (WY) form: the same recurrence as
// gated_deltanet.cu's gdn_recurrence (ferrite_model::plan::LinearAttentionSpec has the math),
// 64 tokens at a time as small matrix products instead of 64 rank-one updates in sequence.
//
// Within a chunk, with G_t the cumulative sum of the log decays g up to token t, S_0 the state
// before the chunk, k and q normalised (q also divided by sqrt(dk)):
//   u_t = beta_t (v_t - e^{G_t} S_0^T k_t) - sum_{j<t} L_tj u_j,  L_tj = beta_t e^{G_t-G_j} k_t.k_j
//   o_t = e^{G_t} S_0^T q_t + sum_{j<=t} P_tj u_j,                 P_tj = e^{G_t-G_j} q_t.k_j
//   S_C = e^{G_C} S_0 + sum_j e^{G_C-G_j} k_j u_j^T
// (unrolling S_t = e^{g_t} S_{t-1} + k_t u_t^T, u_t = beta_t (v_t - e^{g_t} S_{t-1}^T k_t)). The
// u_t solve the unit lower-triangular system (I + L) u = beta r; T = (I + L)^-1 is the WY
// form's triangular inverse.
//
// Two kernels. gdn_chunk_prep, one block per (value head, chunk), everything that does not
// depend on S: per token of the chunk its row of T = (I + L)^-1 (u = T (beta r), the forward
// substitution done once), its row of P, its G and beta, into `chunk` ([token row][value head]
// [GDN_CHUNK_ROW] floats: T row | P row | G | beta). gdn_chunked then walks each sequence's
// chunks in order: r = v - e^G S^T k, u = T (beta r), o = e^G S^T q + P u, the state update.
// Columns of S evolve independently, so a gdn_chunked block owns one 32-column slice of one
// value head of one sequence: grid = (value heads, ceil(dv / 32), sequences), block = 256. It
// reads q, k, v from the convolution's output and writes the head's un-normalised outputs o
// over the slice's v columns of the same rows (no other block reads them); gdn_gated_norm then
// norms and gates them into bf16. The state slot's S (f32) is read at the start unless the
// sequence is fresh, and written back at the end. Same state layout as gated_deltanet.cu.
#include "common.cuh"

#define GDN_CHUNK 64
#define GDN_SLICE 32
// Row strides in shared memory, one more than the row so a column walk spreads over banks.
#define GDN_LDC (GDN_CHUNK + 1)
// Most key dims (the state update keeps dk / 8 sums a thread).
#define GDN_MAX_DK_CHUNKED 128
// Floats per token and value head in `chunk`: T row, P row, G, beta, padding.
#define GDN_CHUNK_ROW (2 * GDN_CHUNK + 4)

__device__ __forceinline__ float gdn_sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ float gdn_softplus(float x) {
    return x > 20.0f ? x : log1pf(__expf(x));
}

// The chunk's q and k rows of key head kh (zero past its end), L2-normalised (q also divided
// by sqrt(dk)), into Qs and Ks ([64][dk + 1]). Ends with a barrier.
__device__ __forceinline__ void gdn_load_qk(const float* __restrict__ conv, int channels,
                                            int key_dim, int kh, int dk, i64 row, int lc,
                                            float* Qs, float* Ks) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, ldk = dk + 1;
    // Eight rows' loads in flight at once before any store: this sits on the chain of a
    // sequence's chunks, where nothing else hides a global load's latency.
    for (int base = tid; base < GDN_CHUNK * dk; base += 8 * blockDim.x) {
        float q[8], k[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int idx = base + u * blockDim.x, t = idx / dk, i = idx % dk;
            q[u] = 0.0f;
            k[u] = 0.0f;
            if (idx < GDN_CHUNK * dk && t < lc) {
                const float* r = conv + (row + t) * channels;
                q[u] = __ldg(r + kh * dk + i);
                k[u] = __ldg(r + key_dim + kh * dk + i);
            }
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int idx = base + u * blockDim.x, t = idx / dk, i = idx % dk;
            if (idx < GDN_CHUNK * dk) {
                Qs[t * ldk + i] = q[u];
                Ks[t * ldk + i] = k[u];
            }
        }
    }
    __syncthreads();
    const float q_scale = rsqrtf((float)dk);
    for (int t = warp; t < lc; t += blockDim.x / 32) {
        float qs = 0.0f, ks = 0.0f;
        for (int i = lane; i < dk; i += 32) {
            const float q = Qs[t * ldk + i], k = Ks[t * ldk + i];
            qs += q * q;
            ks += k * k;
        }
        const float qn = rsqrtf(warp_sum(qs) + 1e-6f) * q_scale;
        const float kn = rsqrtf(warp_sum(ks) + 1e-6f);
        for (int i = lane; i < dk; i += 32) {
            Qs[t * ldk + i] *= qn;
            Ks[t * ldk + i] *= kn;
        }
    }
    __syncthreads();
}

// Shared memory (floats): Q, K [64][dk + 1]; L, T [64][65]; G, B [64].
// grid = (value heads, ceil(longest sequence / 64), sequences), block = 256.
extern "C" __global__ void __launch_bounds__(256) gdn_chunk_prep(
    const float* __restrict__ conv, const float* __restrict__ mixed, int ld, int b_col,
    int a_col, const float* __restrict__ decay_rate, const float* __restrict__ dt_bias,
    float* __restrict__ chunk, const i32* __restrict__ seq_row, const i32* __restrict__ seq_len,
    const i32* __restrict__ seq_slot, int key_heads, int value_heads, int dk, int dv, int tiled,
    int tokenwise_max_len) {
    extern __shared__ float smem[];
    const int h = blockIdx.x, t0 = blockIdx.y * GDN_CHUNK, s = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31;
    const int slot = seq_slot[s], row0 = seq_row[s], len = seq_len[s];
    const int key_dim = key_heads * dk, channels = 2 * key_dim + value_heads * dv;
    const int kh = tiled ? h % key_heads : h / (value_heads / key_heads);
    const int ldk = dk + 1;
    float* Qs = smem;
    float* Ks = Qs + GDN_CHUNK * ldk;
    float* Ls = Ks + GDN_CHUNK * ldk;
    float* Ts = Ls + GDN_CHUNK * GDN_LDC;
    float* G = Ts + GDN_CHUNK * GDN_LDC;
    float* B = G + GDN_CHUNK;
    const float a_h = decay_rate[h], dt_h = dt_bias[h];
    pdl_enter();
    if (slot < 0 || t0 >= len || len <= tokenwise_max_len) return;
    const int lc = min(GDN_CHUNK, len - t0);
    const i64 row = row0 + t0;
    if (tid < GDN_CHUNK) {
        float beta = 0.0f, g = 0.0f;
        if (tid < lc) {
            const float* m = mixed + (row + tid) * ld;
            beta = gdn_sigmoid(m[b_col + h]);
            g = a_h * gdn_softplus(m[a_col + h] + dt_h);
        }
        G[tid] = g;
        B[tid] = beta;
    }
    gdn_load_qk(conv, channels, key_dim, kh, dk, row, lc, Qs, Ks);
    // The running sum of g over the chunk (warp 0).
    if (tid < 32) {
        float g0 = G[lane], g1 = G[lane + 32];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y0 = __shfl_up_sync(FULL_MASK, g0, o);
            const float y1 = __shfl_up_sync(FULL_MASK, g1, o);
            if (lane >= o) {
                g0 += y0;
                g1 += y1;
            }
        }
        const float first_half = __shfl_sync(FULL_MASK, g0, 31);
        G[lane] = g0;
        G[lane + 32] = g1 + first_half;
    }
    __syncthreads();
    // L (strictly lower, into shared memory) and P (lower with the diagonal, straight to
    // `chunk`), 4 x 4 entries a thread; blocks above the diagonal are zeros.
    {
        const int ti = tid / 16, tj = tid % 16;
        if (ti * 4 < lc) {
            float kk[4][4] = {}, qk[4][4] = {};
            if (tj <= ti) {
                for (int i = 0; i < dk; ++i) {
                    float kr[4], qr[4], kc[4];
#pragma unroll
                    for (int a = 0; a < 4; ++a) {
                        kr[a] = Ks[(ti * 4 + a) * ldk + i];
                        qr[a] = Qs[(ti * 4 + a) * ldk + i];
                        kc[a] = Ks[(tj * 4 + a) * ldk + i];
                    }
#pragma unroll
                    for (int a = 0; a < 4; ++a)
#pragma unroll
                        for (int b = 0; b < 4; ++b) {
                            kk[a][b] += kr[a] * kc[b];
                            qk[a][b] += qr[a] * kc[b];
                        }
                }
            }
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const int t = ti * 4 + a;
                float* out = chunk + ((row + t) * value_heads + h) * GDN_CHUNK_ROW + GDN_CHUNK;
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    const int j = tj * 4 + b;
                    const float d = j <= t ? __expf(G[t] - G[j]) : 0.0f;
                    Ls[t * GDN_LDC + j] = j < t ? B[t] * d * kk[a][b] : 0.0f;
                    if (t < lc) out[j] = d * qk[a][b];
                }
            }
        }
    }
    __syncthreads();
    // T = (I + L)^-1, lower triangular with a unit diagonal: thread m owns column m,
    // T[t][m] = [t == m] - sum_{m <= j < t} L[t][j] T[j][m].
    if (tid < GDN_CHUNK) {
        const int m = tid;
        for (int t = 0; t < lc; ++t) {
            float v = t == m ? 1.0f : 0.0f;
            for (int j = m; j < t; ++j) v -= Ls[t * GDN_LDC + j] * Ts[j * GDN_LDC + m];
            Ts[t * GDN_LDC + m] = t < m ? 0.0f : v;
        }
    }
    __syncthreads();
    for (int idx = tid; idx < lc * GDN_CHUNK; idx += blockDim.x) {
        const int t = idx / GDN_CHUNK, j = idx % GDN_CHUNK;
        chunk[((row + t) * value_heads + h) * GDN_CHUNK_ROW + j] = Ts[t * GDN_LDC + j];
    }
    if (tid < lc) {
        float* out = chunk + ((row + tid) * value_heads + h) * GDN_CHUNK_ROW + 2 * GDN_CHUNK;
        out[0] = G[tid];
        out[1] = B[tid];
    }
}

// Shared memory (floats): Q, K [64][dk + 1]; S [dk][32]; R, U [64][32]; T, P [64][64]; G, B [64].
extern "C" __global__ void __launch_bounds__(256) gdn_chunked(
    float* __restrict__ conv, const float* __restrict__ chunk, float* __restrict__ state,
    const i32* __restrict__ seq_row, const i32* __restrict__ seq_len,
    const i32* __restrict__ seq_slot, const i32* __restrict__ seq_fresh, i64 slot_stride,
    i64 layer_offset, int key_heads, int value_heads, int dk, int dv, int tiled,
    int tokenwise_max_len) {
    extern __shared__ float smem[];
    const int h = blockIdx.x, col0 = blockIdx.y * GDN_SLICE, s = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int slot = seq_slot[s], row0 = seq_row[s], len = seq_len[s];
    const bool fresh = seq_fresh[s] != 0;
    const int key_dim = key_heads * dk, channels = 2 * key_dim + value_heads * dv;
    const int kh = tiled ? h % key_heads : h / (value_heads / key_heads);
    const int v_col = 2 * key_dim + h * dv + col0;
    const int ldk = dk + 1;
    float* Qs = smem;
    float* Ks = Qs + GDN_CHUNK * ldk;
    float* S = Ks + GDN_CHUNK * ldk;
    float* R = S + dk * GDN_SLICE;
    float* U = R + GDN_CHUNK * GDN_SLICE;
    float* Ts = U + GDN_CHUNK * GDN_SLICE;
    float* Ps = Ts + GDN_CHUNK * GDN_CHUNK;
    float* G = Ps + GDN_CHUNK * GDN_CHUNK;
    float* B = G + GDN_CHUNK;
    pdl_enter();
    // Sequences of at most tokenwise_max_len tokens are gdn_recurrence's.
    if (slot < 0 || len == 0 || len <= tokenwise_max_len) return;
    float* Sg = state + (i64)slot * slot_stride + layer_offset + (i64)h * dk * dv;
    // A thread has one column of the slice: rows warp * 8 .. + 8 of a chunk's tokens, and
    // rows warp, warp + 8, ... of S.
    const int c = lane, tb = warp * 8;
    const bool col_ok = col0 + c < dv;
    for (int idx = tid; idx < dk * GDN_SLICE; idx += blockDim.x) {
        const int i = idx / GDN_SLICE, cc = idx % GDN_SLICE;
        S[idx] = (!fresh && col0 + cc < dv) ? Sg[(i64)i * dv + col0 + cc] : 0.0f;
    }
    for (int t0 = 0; t0 < len; t0 += GDN_CHUNK) {
        const int lc = min(GDN_CHUNK, len - t0);
        const i64 row = row0 + t0;
        if (tid < GDN_CHUNK) {
            const float* gb = chunk + ((row + tid) * value_heads + h) * GDN_CHUNK_ROW + 2 * GDN_CHUNK;
            G[tid] = tid < lc ? gb[0] : 0.0f;
            B[tid] = tid < lc ? gb[1] : 0.0f;
        }
        // The chunk's T and P rows (zeros past its end), sixteen loads in flight a thread.
        for (int base = tid; base < GDN_CHUNK * GDN_CHUNK; base += 8 * blockDim.x) {
            float tv[8], pv[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int idx = base + u * blockDim.x, t = idx / GDN_CHUNK, j = idx % GDN_CHUNK;
                const float* src = chunk + ((row + t) * value_heads + h) * GDN_CHUNK_ROW + j;
                tv[u] = t < lc ? __ldg(src) : 0.0f;
                pv[u] = t < lc ? __ldg(src + GDN_CHUNK) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int idx = base + u * blockDim.x;
                Ts[idx] = tv[u];
                Ps[idx] = pv[u];
            }
        }
        gdn_load_qk(conv, channels, key_dim, kh, dk, row, lc, Qs, Ks);
        // beta (v - e^G S^T k) into R; e^G S^T q kept for the outputs.
        float o_acc[8];
        {
            // v first: its loads are in flight during the products below.
            float v[8];
#pragma unroll
            for (int a = 0; a < 8; ++a)
                v[a] = (tb + a < lc && col_ok) ? __ldg(conv + (row + tb + a) * channels + v_col + c)
                                               : 0.0f;
            float kr[8] = {}, qr[8] = {};
            if (tb < lc) {
                for (int i = 0; i < dk; ++i) {
                    const float sv = S[i * GDN_SLICE + c];
#pragma unroll
                    for (int a = 0; a < 8; ++a) {
                        kr[a] += Ks[(tb + a) * ldk + i] * sv;
                        qr[a] += Qs[(tb + a) * ldk + i] * sv;
                    }
                }
            }
#pragma unroll
            for (int a = 0; a < 8; ++a) {
                const int t = tb + a;
                float r = 0.0f;
                o_acc[a] = 0.0f;
                if (t < lc && col_ok) {
                    const float eg = __expf(G[t]);
                    r = B[t] * (v[a] - eg * kr[a]);
                    o_acc[a] = eg * qr[a];
                }
                R[t * GDN_SLICE + c] = r;
            }
        }
        __syncthreads();
        // u = T r, then o += P u (a warp's lanes read the same T or P entry: a broadcast).
        {
            float u[8] = {};
            const int j_end = min(lc, tb + 8);
            for (int j = 0; j < j_end; ++j) {
                const float r = R[j * GDN_SLICE + c];
#pragma unroll
                for (int a = 0; a < 8; ++a) u[a] += Ts[(tb + a) * GDN_CHUNK + j] * r;
            }
#pragma unroll
            for (int a = 0; a < 8; ++a) U[(tb + a) * GDN_SLICE + c] = tb + a < lc ? u[a] : 0.0f;
        }
        __syncthreads();
        if (tb < lc) {
            const int j_end = min(lc, tb + 8);
            for (int j = 0; j < j_end; ++j) {
                const float u = U[j * GDN_SLICE + c];
#pragma unroll
                for (int a = 0; a < 8; ++a) o_acc[a] += Ps[(tb + a) * GDN_CHUNK + j] * u;
            }
#pragma unroll
            for (int a = 0; a < 8; ++a)
                if (tb + a < lc && col_ok) conv[(row + tb + a) * channels + v_col + c] = o_acc[a];
        }
        // S = e^{G_C} S + sum_j e^{G_C - G_j} k_j u_j^T.
        {
            const float g_last = G[lc - 1];
            float acc[GDN_MAX_DK_CHUNKED / 8];
#pragma unroll
            for (int m = 0; m < GDN_MAX_DK_CHUNKED / 8; ++m) acc[m] = 0.0f;
            for (int j = 0; j < lc; ++j) {
                const float u = U[j * GDN_SLICE + c] * __expf(g_last - G[j]);
#pragma unroll
                for (int m = 0; m < GDN_MAX_DK_CHUNKED / 8; ++m) {
                    const int i = warp + 8 * m;
                    if (i < dk) acc[m] += Ks[j * ldk + i] * u;
                }
            }
            const float eg = __expf(g_last);
#pragma unroll
            for (int m = 0; m < GDN_MAX_DK_CHUNKED / 8; ++m) {
                const int i = warp + 8 * m;
                if (i < dk) S[i * GDN_SLICE + c] = eg * S[i * GDN_SLICE + c] + acc[m];
            }
        }
        __syncthreads();
    }
    for (int idx = tid; idx < dk * GDN_SLICE; idx += blockDim.x) {
        const int i = idx / GDN_SLICE, cc = idx % GDN_SLICE;
        if (col0 + cc < dv) Sg[(i64)i * dv + col0 + cc] = S[idx];
    }
}

// The gated RMSNorm of gdn_chunked's outputs: per token row and value head,
// w * (o / rms(o)) * silu(z) into out [n, value_dim] as bf16. o sits in `conv`'s v columns
// (rows `channels` floats apart, from column v_col), z in `mixed` (rows `ld` apart, from
// z_col). grid = (n, value heads), block = dv rounded up to whole warps.
extern "C" __global__ void gdn_gated_norm(const float* __restrict__ conv, int channels, int v_col,
                                          const float* __restrict__ mixed, int ld, int z_col,
                                          const float* __restrict__ norm_w,
                                          bf16* __restrict__ out, int dv, float eps) {
    __shared__ float scratch[32];
    const int r = blockIdx.x, h = blockIdx.y, j = threadIdx.x;
    const int value_dim = gridDim.y * dv;
    const bool active = j < dv;
    const float w_j = active ? norm_w[j] : 0.0f;
    pdl_enter();
    const float o = active ? conv[(i64)r * channels + v_col + h * dv + j] : 0.0f;
    const float mean_sq = block_sum(o * o, scratch) / (float)dv;
    if (!active) return;
    const float z = mixed[(i64)r * ld + z_col + h * dv + j];
    out[(i64)r * value_dim + h * dv + j] =
        __float2bfloat16(w_j * (o * rsqrtf(mean_sq + eps)) * (z * gdn_sigmoid(z)));
}
