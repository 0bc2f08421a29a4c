// One-token decode (batch 1) GEMVs with the kernels around them folded in, so that a layer
// launches five kernels instead of nine (the launch gaps and the tiny kernels between the
// GEMVs were a third of a 1.5B model's step):
//   gemv_bf16_add:      x[r] += (a W^T)[r]: the O and down projections join the f32 residual
//                       stream themselves, leaving no delta for the next norm to add;
//   gemv_norm_<act>:    act(gate) * up of rmsnorm(x) W^T, bf16: the MLP's norm, gate/up
//                       product and activation;
//   gemv_norm_rope:     the attention's norm, QKV product, bias, RoPE and K/V cache write.
// Each gives the bits of the kernels it replaces (add_rmsnorm, gemv.cu, gated_activation.cu,
// rope_kv.cu): the same sums in the same order (gemv.cuh, norm.cuh) and the same rounding
// (activation.cuh, rope.cuh), so fusing changes no token. grid = ceil(groups / (8 / SPLIT)),
// block = 256; the split is the one gemv.cu would use for the whole layer.
#include "activation.cuh"
#include "gemv.cuh"
#include "norm.cuh"
#include "rope.cuh"

// Largest hidden size whose normalised row a block keeps in shared memory (16 KiB).
#define FUSED_MAX_HIDDEN 8192

// Token 0's row of the f32 residual stream, RMS-normalised by every block into its shared
// memory as add_rmsnorm would write it (same thread layout: block = 256).
struct NormedInput {
    const float* __restrict__ x;
    const float* __restrict__ weight;
    int hidden;
    float eps;
    bf16* s;         // shared [hidden]
    float* scratch;  // shared [32]
    __device__ __forceinline__ void prepare() const {
        pdl_enter();
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const float4* w4 = reinterpret_cast<const float4*>(weight);
        const int n4 = hidden / 4;
        float sum_sq = 0.0f;
        for (int c = threadIdx.x; c < n4; c += blockDim.x) sum_sq += sum_sq4(x4[c]);
        sum_sq = block_sum(sum_sq, scratch);
        const float inv_rms = inv_rms_of(sum_sq, hidden, eps);
        __nv_bfloat162* s2 = reinterpret_cast<__nv_bfloat162*>(s);
        for (int c = threadIdx.x; c < n4; c += blockDim.x) store_normed4(s2 + 2 * c, x4[c], inv_rms, w4[c]);
        __syncthreads();
    }
    __device__ __forceinline__ void load(int, int c, float xf[8]) const {
        unpack8(reinterpret_cast<const uint4*>(s)[c], xf);
    }
};

#define NORMED_INPUT(NAME)                                        \
    __shared__ __align__(16) bf16 NAME##_row[FUSED_MAX_HIDDEN];   \
    __shared__ float NAME##_scratch[32];                          \
    const NormedInput NAME{x, norm_weight, hidden, eps, NAME##_row, NAME##_scratch};

// y[row] += v: the addition add_rmsnorm would make (residual + delta).
struct AddStore {
    float* __restrict__ y;
    int ldy, row;
    __device__ __forceinline__ void store(int t, const float (&v)[1]) {
        float* p = y + (i64)t * ldy + row;
        *p = *p + v[0];
    }
};

// out[j] = bf16(act(gate_j) * up_j).
template <typename Act>
struct GatedStore {
    bf16* __restrict__ out;
    int j;
    __device__ __forceinline__ void store(int, const float (&v)[2]) {
        out[j] = __float2bfloat16_rn(Act::apply(v[0]) * v[1]);
    }
};

// A rotated pair of a Q or K head (`head`, element `i` of half its pairs), or two adjacent V
// elements, of QKV rows [q (num_heads*hd) | k (kv_heads*hd) | v (kv_heads*hd)].
struct RopeStore {
    const float* __restrict__ bias;
    const i32* __restrict__ positions;
    const i32* __restrict__ slots;
    const float* __restrict__ inv_freq;
    bf16* __restrict__ q_out;
    bf16* __restrict__ k_cache;
    bf16* __restrict__ v_cache;
    int num_heads, num_kv_heads, head_dim, page_size;
    int row0, row1, head, i;  // head < 0: a V pair
    __device__ __forceinline__ void store(int, const float (&v)[2]) {
        float a = v[0], b = v[1];
        if (bias) {
            a += bias[row0];
            b += bias[row1];
        }
        const int slot = slots[0];
        const i64 page = slot >= 0 ? slot / page_size : 0;
        const int offset = slot >= 0 ? slot % page_size : 0;
        if (head >= 0) {
            float ra, rb;
            rope_rotate(a, b, (float)positions[0] * inv_freq[i], ra, rb);
            if (head < num_heads) {
                q_out[row0] = __float2bfloat16_rn(ra);
                q_out[row1] = __float2bfloat16_rn(rb);
            } else if (slot >= 0) {
                const int kvh = head - num_heads;
                bf16* k = k_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim;
                k[row0 - head * head_dim] = __float2bfloat16_rn(ra);
                k[row1 - head * head_dim] = __float2bfloat16_rn(rb);
            }
        } else if (slot >= 0) {
            const int kv_dim = num_kv_heads * head_dim;
            const int e = row0 - num_heads * head_dim - kv_dim, kvh = e / head_dim;
            bf16* vv = v_cache + ((page * num_kv_heads + kvh) * page_size + offset) * head_dim;
            vv[e % head_dim] = __float2bfloat16_rn(a);
            vv[e % head_dim + 1] = __float2bfloat16_rn(b);
        }
    }
};

template <int SPLIT>
__device__ __forceinline__ void gemv_add(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                         float* __restrict__ y, int rows, int k, int ldy) {
    const int row = gemv_group_index<SPLIT>();
    const int rows_of_group[1] = {row};
    AddStore out{y, ldy, row};
    gemv_group<1, SPLIT, 1, 8>(w, k, rows_of_group, row < rows, GlobalInput{x, k}, out);
}

// w: [2 * inter, hidden], gate rows then up rows; a group computes gate row j and up row j.
template <typename Act, int SPLIT>
__device__ __forceinline__ void gemv_norm_gated(const bf16* __restrict__ w, const NormedInput& in,
                                                int inter, bf16* __restrict__ out) {
    const int j = gemv_group_index<SPLIT>();
    const int rows_of_group[2] = {j, inter + j};
    GatedStore<Act> store{out, j};
    gemv_group<1, SPLIT, 2, 4>(w, in.hidden, rows_of_group, j < inter, in, store);
}

#define ROPE_ARGS                                                                            \
    const float *__restrict__ bias, const i32 *__restrict__ positions,                       \
        const i32 *__restrict__ slots, const float *__restrict__ inv_freq,                   \
        bf16 *__restrict__ q_out, bf16 *__restrict__ k_cache, bf16 *__restrict__ v_cache,    \
        int num_heads, int num_kv_heads, int head_dim, int page_size, int interleaved

// Groups: the rotated pairs of every Q and K head, then the V elements two by two.
template <int SPLIT>
__device__ __forceinline__ void gemv_norm_rope(const bf16* __restrict__ w, const NormedInput& in,
                                               ROPE_ARGS) {
    const int g = gemv_group_index<SPLIT>();
    const int half = head_dim / 2, q_dim = num_heads * head_dim, kv_dim = num_kv_heads * head_dim;
    const int rotated = (num_heads + num_kv_heads) * half;
    RopeStore store{bias, positions, slots, inv_freq, q_out, k_cache, v_cache, num_heads,
                    num_kv_heads, head_dim, page_size, 0, 0, -1, 0};
    if (g < rotated) {
        store.head = g / half;
        store.i = g % half;
        store.row0 = store.head * head_dim + (interleaved ? 2 * store.i : store.i);
        store.row1 = store.row0 + (interleaved ? 1 : half);
    } else {
        store.row0 = q_dim + kv_dim + 2 * (g - rotated);
        store.row1 = store.row0 + 1;
    }
    const int rows_of_group[2] = {store.row0, store.row1};
    const bool live = g < rotated + kv_dim / 2;
    gemv_group<1, SPLIT, 2, 4>(w, in.hidden, rows_of_group, live, in, store);
}

#define NORM_ARGS \
    const float *__restrict__ x, const float *__restrict__ norm_weight, float eps, int hidden

#define FUSED_KERNELS(SPLIT)                                                                 \
    extern "C" __global__ void gemv_bf16_add_s##SPLIT(const bf16* __restrict__ w,            \
                                                      const bf16* __restrict__ x,            \
                                                      float* __restrict__ y, int rows, int k, \
                                                      int ldy) {                             \
        gemv_add<SPLIT>(w, x, y, rows, k, ldy);                                              \
    }                                                                                        \
    extern "C" __global__ void gemv_norm_silu_s##SPLIT(const bf16* __restrict__ w, NORM_ARGS, \
                                                       int inter, bf16* __restrict__ out) {  \
        NORMED_INPUT(in)                                                                     \
        gemv_norm_gated<Silu, SPLIT>(w, in, inter, out);                                     \
    }                                                                                        \
    extern "C" __global__ void gemv_norm_gelu_tanh_s##SPLIT(                                 \
        const bf16* __restrict__ w, NORM_ARGS, int inter, bf16* __restrict__ out) {          \
        NORMED_INPUT(in)                                                                     \
        gemv_norm_gated<GeluTanh, SPLIT>(w, in, inter, out);                                 \
    }                                                                                        \
    extern "C" __global__ void gemv_norm_rope_s##SPLIT(const bf16* __restrict__ w, NORM_ARGS, \
                                                       ROPE_ARGS) {                          \
        NORMED_INPUT(in)                                                                     \
        gemv_norm_rope<SPLIT>(w, in, bias, positions, slots, inv_freq, q_out, k_cache,       \
                              v_cache, num_heads, num_kv_heads, head_dim, page_size,         \
                              interleaved);                                                  \
    }
FUSED_KERNELS(1)
FUSED_KERNELS(4)
FUSED_KERNELS(8)
