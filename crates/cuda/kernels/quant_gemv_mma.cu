// Batch-1 product on a Q4_K matrix with the tensor cores doing the multiply-adds:
// y[row] = sum_k W[row, k] * x[k], W Q4_K as in the file (quant.cuh), x bf16 [k], y f32.
//
// Why: quant_gemv.cu spends ~4 instructions per weight (nibble to float, one FMA, its share of
// x), and a batch-1 step of an 8B Q4_K_M model is bound by that issue rate, not by the 4.7 GB
// it streams. Here a weight costs ~1.4 (extract a nibble pair into a bf16 pair, subtract the
// magic offset, all two at a time), and `mma.m16n8k16` does the products: exact small integers
// times bf16 x, summed in f32, as the GEMV's `q . x` runs were.
//
// The tile: a warp takes 16 rows; lane (g = lane / 4, t = lane % 4) reads the 32 nibble bytes
// of unit t (elements 64 t .. 64 t + 63) of rows g and g + 8 in every 256-element block. The
// mma's k index is a permutation of the block's elements chosen so that each lane's A fragment
// comes from its own bytes: word j of unit t gives, for its low nibbles (sub-block 2 t),
// k = 2 t, 2 t + 1 <- elements 4 j, 4 j + 2 and k = 2 t + 8, 2 t + 9 <- 4 j + 1, 4 j + 3; its
// high nibbles (sub-block 2 t + 1) the same in a second mma. Each k then belongs to one unit
// and so to one scale; the mma's 8 columns keep the units apart: B's column t holds unit t's
// low x values (zero elsewhere) and column 4 + t its high ones, so C[row][n] is the sum over
// one sub-block, and the scale and the min are applied per sub-block after the 16 mma of a
// block: a * (q . x) + b * sum(x), sum(x) per sub-block computed once per thread block.
// Only lanes 5 t (column t) and 16 + 5 t (column 4 + t) carry x; B is staged in shared memory
// in that order, so a lane's B fragment is one 8-byte load (from a zero slot off the diagonal).
//
// Each row's sum order depends on k and the split alone. Thread block: 8 warps, 8 / SPLIT
// tiles of 16 rows, SPLIT warps per tile along k (partials summed in order through shared
// memory). k <= QMMA_MAX_K (the staging is static shared memory).
#include "common.cuh"
#include "quant.cuh"

#define QMMA_MAX_BLOCKS 64  // k <= 16,384
#define QMMA_ZERO_SLOT (QMMA_MAX_BLOCKS * 64)

// Two nibbles (bits 0-3 and 16-19 of v) as a bf16 pair, exact: into the mantissa of 128, less
// 128.
__device__ __forceinline__ u32 nibble_pair(u32 v) {
    const u32 biased = and_or<0x000f000fu>(v, 0x43004300u);
    __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&biased);
    h = __hsub2(h, __floats2bfloat162_rn(128.0f, 128.0f));
    return *reinterpret_cast<const u32*>(&h);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                         u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One lane's words of one block: the head (d, dmin, scales) and unit t's 32 nibble bytes, of
// rows g and g + 8.
struct Q4kLane {
    uint4 head0, head8, q0a, q0b, q8a, q8b;
};

__device__ __forceinline__ Q4kLane q4k_lane_load(const unsigned char* w, i64 block0,
                                                 i64 block8, int t) {
    const uint4* r0 = reinterpret_cast<const uint4*>(w + block0 * 144);
    const uint4* r8 = reinterpret_cast<const uint4*>(w + block8 * 144);
    return {r0[0], r8[0], r0[1 + 2 * t], r0[2 + 2 * t], r8[1 + 2 * t], r8[2 + 2 * t]};
}

template <int SPLIT>
__device__ __forceinline__ void q4k_mma_gemv(const unsigned char* __restrict__ w,
                                             const bf16* __restrict__ x, float* __restrict__ y,
                                             int rows, int k, int ldy) {
    // B fragments: [block][word j][role] pairs (x[e], x[e + 2]), (x[e + 1], x[e + 3]) with
    // e = 64 (role % 4) + 32 (role / 4) + 4 j; then one zero slot.
    __shared__ uint2 s_b[QMMA_MAX_BLOCKS * 64 + 1];
    __shared__ float s_sx[QMMA_MAX_BLOCKS * 8];  // sum of x per 32-element sub-block
    __shared__ float s_part[8][16];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int tiles_per_block = 8 / SPLIT;
    const int row0 = (blockIdx.x * tiles_per_block + warp / SPLIT) * 16;
    const int part = warp % SPLIT;
    const int nb = k / 256;
    const int per_part = (nb + SPLIT - 1) / SPLIT;
    const int b_begin = part * per_part;
    const int b_end = min(nb, b_begin + per_part);
    // Rows past the end read the last row again and are not written.
    const i64 rb0 = (i64)min(row0 + g, rows - 1) * nb;
    const i64 rb8 = (i64)min(row0 + g + 8, rows - 1) * nb;

    // Weights are never written by a kernel: the first block's loads precede the wait.
    Q4kLane cur = {};
    if (b_begin < b_end) cur = q4k_lane_load(w, rb0 + b_begin, rb8 + b_begin, t);
    pdl_enter();

    // Stage B and the sub-block sums: a thread per (block, role), 8 words each.
    for (int task = threadIdx.x; task < nb * 8; task += blockDim.x) {
        const int b = task >> 3, role = task & 7;
        const int e0 = b * 256 + 64 * (role & 3) + 32 * (role >> 2);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const uint2 v = *reinterpret_cast<const uint2*>(x + e0 + 4 * j);
            s_b[(b * 8 + j) * 8 + role] = make_uint2(__byte_perm(v.x, v.y, 0x5410),
                                                     __byte_perm(v.x, v.y, 0x7632));
            const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
            const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
            sum += lo.x;
            sum += lo.y;
            sum += hi.x;
            sum += hi.y;
        }
        // Role r covers sub-block 2 (r % 4) + r / 4 of block b.
        s_sx[b * 8 + 2 * (role & 3) + (role >> 2)] = sum;
    }
    if (threadIdx.x == 0) s_b[QMMA_ZERO_SLOT] = make_uint2(0, 0);
    __syncthreads();

    // This lane's B: column g carries unit t's low x when g == t, column 4 + t its high x when
    // g == 4 + t; every other lane reads the zero slot.
    const int role = g == t ? t : g == 4 + t ? 4 + t : -1;
    // The C columns this lane holds, 2 t and 2 t + 1: low sub-blocks of units 2 t, 2 t + 1
    // (first mma) for t < 2, high ones of units 2 t - 4, 2 t - 3 (second mma) for t >= 2.
    const bool high_cols = t >= 2;
    const int sub_a = high_cols ? 2 * (2 * t - 4) + 1 : 2 * (2 * t);
    const int sub_b = sub_a + 2;

    const int b_stride = role >= 0 ? 8 : 0;
    float acc0 = 0.0f, acc8 = 0.0f;
    for (int b = b_begin; b < b_end; ++b) {
        const uint2* b_src = s_b + (role >= 0 ? b * 64 + role : QMMA_ZERO_SLOT);
        Q4kLane nxt = cur;
        if (b + 1 < b_end) nxt = q4k_lane_load(w, rb0 + b + 1, rb8 + b + 1, t);
        float c_lo[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c_hi[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 w0 = word_of(j < 4 ? cur.q0a : cur.q0b, j & 3);
            const u32 w8 = word_of(j < 4 ? cur.q8a : cur.q8b, j & 3);
            const uint2 bv = b_src[j * b_stride];
            // Low nibbles: bytes 0, 2 then bytes 1, 3 of the word.
            mma_bf16(c_lo, nibble_pair(w0), nibble_pair(w8), nibble_pair(w0 >> 8),
                     nibble_pair(w8 >> 8), bv.x, bv.y);
            // High nibbles.
            mma_bf16(c_hi, nibble_pair(w0 >> 4), nibble_pair(w8 >> 4), nibble_pair(w0 >> 12),
                     nibble_pair(w8 >> 12), bv.x, bv.y);
        }
        // value = a q + b per sub-block: a (q . x) + b sum(x).
        float c[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) c[i] = high_cols ? c_hi[i] : c_lo[i];
        const float sxa = s_sx[b * 8 + sub_a], sxb = s_sx[b * 8 + sub_b];
        float a, bias;
        affine_k4(cur.head0, sub_a, a, bias);
        acc0 += fmaf(a, c[0], bias * sxa);
        affine_k4(cur.head0, sub_b, a, bias);
        acc0 += fmaf(a, c[1], bias * sxb);
        affine_k4(cur.head8, sub_a, a, bias);
        acc8 += fmaf(a, c[2], bias * sxa);
        affine_k4(cur.head8, sub_b, a, bias);
        acc8 += fmaf(a, c[3], bias * sxb);
        cur = nxt;
    }
    // The four lanes of a row group hold its eight sub-block columns.
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
        acc0 += __shfl_xor_sync(FULL_MASK, acc0, o);
        acc8 += __shfl_xor_sync(FULL_MASK, acc8, o);
    }
    if constexpr (SPLIT > 1) {
        if (t == 0) {
            s_part[warp][g] = acc0;
            s_part[warp][g + 8] = acc8;
        }
        __syncthreads();
        if (part == 0 && lane < 16) {
            float total = 0.0f;
#pragma unroll
            for (int s = 0; s < SPLIT; ++s) total += s_part[warp + s][lane];
            if (row0 + lane < rows) y[row0 + lane] = total;
        }
    } else {
        if (t == 0) {
            if (row0 + g < rows) y[row0 + g] = acc0;
            if (row0 + g + 8 < rows) y[row0 + g + 8] = acc8;
        }
    }
    (void)ldy;
}

// grid = ceil(rows / (16 * 8 / SPLIT)), block = 256 (8 warps).
#define QMMA_KERNEL(SPLIT)                                                                      \
    extern "C" __global__ void __launch_bounds__(256) qgemv_mma_q4_k_1_s##SPLIT(                \
        const unsigned char* w, const bf16* __restrict__ x, float* __restrict__ y, int rows,     \
        int k, int ldy) {                                                                       \
        q4k_mma_gemv<SPLIT>(w, x, y, rows, k, ldy);                                             \
    }
QMMA_KERNEL(1)
QMMA_KERNEL(2)
QMMA_KERNEL(4)
QMMA_KERNEL(8)
