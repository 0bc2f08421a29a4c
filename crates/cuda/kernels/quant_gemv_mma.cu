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
// Q6_K the same way: lane t reads quant.cuh's unit t (16 l of one half, all four runs r) of
// rows g and g + 8; each word j gives four mma, one per run r, whose values q - 32 (6 bits
// from a nibble and two high bits, exact in bf16) share scale sc[8 h + l / 16 + 2 r]. Run r
// of unit t goes to column t + 4 (r % 2), runs 0, 1 into one accumulator and 2, 3 into
// another; B is zero but in the lanes of the column being written, so the columns stay apart
// without a min term (Q6_K has none).
//
// Each row's sum order depends on k and the split alone. Thread block: 8 warps, 8 / SPLIT
// tiles of 16 rows, SPLIT warps per tile along k (partials summed in order through shared
// memory). k <= QMMA_MAX_K (the staging is static shared memory).
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

// k <= 22,528: the Qwen3.5-27B shape's MLP down product (k = 17,408) fits, with the Q4_K
// kernel's staging at 48,392 bytes of the 49,152 static shared memory allows (registers, not
// shared memory, hold these kernels at two blocks an SM).
#define QMMA_MAX_BLOCKS 88
#define QMMA_ZERO_SLOT (QMMA_MAX_BLOCKS * 64)

// Two nibbles (bits 0-3 and 16-19 of v) as a bf16 pair, exact: into the mantissa of 128, less
// 128.
__device__ __forceinline__ u32 nibble_pair(u32 v) {
    const u32 biased = and_or<0x000f000fu>(v, 0x43004300u);
    __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&biased);
    h = __hsub2(h, __floats2bfloat162_rn(128.0f, 128.0f));
    return *reinterpret_cast<const u32*>(&h);
}

// Where a warp works: its 16-row tile, its share of k's 256-element blocks, and the lane's
// place (g, t) in the mma fragments.
template <int SPLIT>
struct MmaTile {
    int lane, warp, g, t, row0, part, b_begin, b_end;
    i64 rb0, rb8;  // first block of rows g and g + 8 (rows past the end read the last row)
    __device__ __forceinline__ MmaTile(int rows, int nb) {
        lane = threadIdx.x & 31;
        warp = threadIdx.x >> 5;
        g = lane >> 2;
        t = lane & 3;
        row0 = (blockIdx.x * (8 / SPLIT) + warp / SPLIT) * 16;
        part = warp % SPLIT;
        const int per_part = (nb + SPLIT - 1) / SPLIT;
        b_begin = part * per_part;
        b_end = min(nb, b_begin + per_part);
        rb0 = (i64)min(row0 + g, rows - 1) * nb;
        rb8 = (i64)min(row0 + g + 8, rows - 1) * nb;
    }
    // Sums the row group's four lanes, then the SPLIT warps of the tile in order, and writes
    // rows g and g + 8 that exist. Every thread of the block calls it (a barrier for SPLIT > 1).
    __device__ __forceinline__ void store(float acc0, float acc8, float* y, int rows,
                                          float (*s_part)[16]) const {
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
        } else if (t == 0) {
            if (row0 + g < rows) y[row0 + g] = acc0;
            if (row0 + g + 8 < rows) y[row0 + g + 8] = acc8;
        }
    }
};

// Four consecutive bf16 x values (x[e .. e + 4] as one 8-byte word).
__device__ __forceinline__ uint2 x4_at(const bf16* x, int e) {
    return *reinterpret_cast<const uint2*>(x + e);
}

// B pairs of four consecutive x values v: (v0, v2), (v1, v3), the order in which nibble_pair
// takes bytes 0, 2 and then 1, 3 of a word.
__device__ __forceinline__ uint2 b_pairs(uint2 v) {
    return make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
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
    const int nb = k / 256;
    const MmaTile<SPLIT> tile(rows, nb);
    const int g = tile.g, t = tile.t, b_begin = tile.b_begin, b_end = tile.b_end;
    const i64 rb0 = tile.rb0, rb8 = tile.rb8;

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
            const uint2 v = x4_at(x, e0 + 4 * j);
            s_b[(b * 8 + j) * 8 + role] = b_pairs(v);
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
    tile.store(acc0, acc8, y, rows, s_part);
    (void)ldy;
}

// Q6_K: unit t (quant.cuh) of rows g and g + 8: ql words for runs 0, 2 (lo) and 1, 3 (hi),
// the qh word, the 16 scales, and d.
struct Q6kLane {
    uint4 lo0, hi0, qh0, sc0, lo8, hi8, qh8, sc8;
    float d0, d8;
};

__device__ __forceinline__ Q6kLane q6k_lane_load(const Planes& p, i64 block0, i64 block8,
                                                 int t) {
    const uint4* r0 = reinterpret_cast<const uint4*>(p.p0 + block0 * 208);
    const uint4* r8 = reinterpret_cast<const uint4*>(p.p0 + block8 * 208);
    const int h = t >> 1, s = t & 1;
    return {r0[4 * h + s], r0[4 * h + 2 + s], r0[8 + 2 * h + s], r0[12],
            r8[4 * h + s], r8[4 * h + 2 + s], r8[8 + 2 * h + s], r8[12],
            half_at(p.p1, block0), half_at(p.p1, block8)};
}

// The 6-bit values of bytes 0 and 2 for run R (the nibble of ql, low for R < 2, beside bits
// 2R, 2R + 1 of qh) as a bf16 pair of q - 32, exact.
template <int R>
__device__ __forceinline__ u32 six_pair(u32 ql, u32 qh) {
    const u32 nib = R >= 2 ? ql >> 4 : ql;
    const u32 top = R == 0 ? qh << 4 : R == 1 ? qh << 2 : R == 2 ? qh : qh >> 2;
    const u32 biased = and_or<0x000f000fu>(nib, 0x43004300u) | (top & 0x00300030u);
    __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&biased);
    h = __hsub2(h, __floats2bfloat162_rn(160.0f, 160.0f));
    return *reinterpret_cast<const u32*>(&h);
}

// Scale of run r of unit o (signed byte 8 (o / 2) + o % 2 + 2 r of the block's 16).
__device__ __forceinline__ float q6k_scale(const uint4& sc, int o, int r) {
    return (float)(int)(signed char)byte_of(sc, 8 * (o >> 1) + (o & 1) + 2 * r);
}

template <int R>
__device__ __forceinline__ void q6k_run(float (&c)[4], const Q6kLane& u, int j, uint2 bv) {
    const u32 l0 = word_of((R & 1) ? u.hi0 : u.lo0, j), l8 = word_of((R & 1) ? u.hi8 : u.lo8, j);
    const u32 h0 = word_of(u.qh0, j), h8 = word_of(u.qh8, j);
    mma_bf16(c, six_pair<R>(l0, h0), six_pair<R>(l8, h8), six_pair<R>(l0 >> 8, h0 >> 8),
             six_pair<R>(l8 >> 8, h8 >> 8), bv.x, bv.y);
}

template <int SPLIT>
__device__ __forceinline__ void q6k_mma_gemv(const Planes p, const bf16* __restrict__ x,
                                             float* __restrict__ y, int rows, int k) {
    // B fragments: [block][word j][run r][unit t], x from e = 128 (t / 2) + 32 r + 16 (t % 2)
    // + 4 j of the block; then one zero slot.
    __shared__ uint2 s_b[QMMA_MAX_BLOCKS * 64 + 1];
    __shared__ float s_part[8][16];
    const int nb = k / 256;
    const MmaTile<SPLIT> tile(rows, nb);
    const int g = tile.g, t = tile.t;

    Q6kLane cur = {};
    if (tile.b_begin < tile.b_end)
        cur = q6k_lane_load(p, tile.rb0 + tile.b_begin, tile.rb8 + tile.b_begin, t);
    pdl_enter();

    for (int task = threadIdx.x; task < nb * 16; task += blockDim.x) {
        const int b = task >> 4, r = (task >> 2) & 3, u = task & 3;
        const int e0 = b * 256 + 128 * (u >> 1) + 32 * r + 16 * (u & 1);
#pragma unroll
        for (int j = 0; j < 4; ++j) s_b[((b * 4 + j) * 4 + r) * 4 + u] = b_pairs(x4_at(x, e0 + 4 * j));
    }
    if (threadIdx.x == 0) s_b[QMMA_ZERO_SLOT] = make_uint2(0, 0);
    __syncthreads();

    // Column t + 4 (r % 2) carries run r of unit t: lane (g, t) feeds B for even runs when
    // g == t, odd runs when g == t + 4, and reads the zero slot otherwise.
    const int parity = g == t ? 0 : g == t + 4 ? 1 : -1;
    // C columns 2 t, 2 t + 1 of this lane: units o0, o0 + 1, runs r0 (first accumulator) and
    // r0 + 2 (second).
    const int o0 = (2 * t) & 3, r0 = t >= 2 ? 1 : 0;
    float acc0 = 0.0f, acc8 = 0.0f;
    for (int b = tile.b_begin; b < tile.b_end; ++b) {
        Q6kLane nxt = cur;
        if (b + 1 < tile.b_end) nxt = q6k_lane_load(p, tile.rb0 + b + 1, tile.rb8 + b + 1, t);
        float c01[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c23[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int at = ((b * 4 + j) * 4) * 4 + t;
            const uint2 zero = s_b[QMMA_ZERO_SLOT];
            const uint2 even = parity == 0 ? s_b[at] : zero;
            const uint2 odd = parity == 1 ? s_b[at + 4] : zero;
            const uint2 even2 = parity == 0 ? s_b[at + 8] : zero;
            const uint2 odd2 = parity == 1 ? s_b[at + 12] : zero;
            q6k_run<0>(c01, cur, j, even);
            q6k_run<1>(c01, cur, j, odd);
            q6k_run<2>(c23, cur, j, even2);
            q6k_run<3>(c23, cur, j, odd2);
        }
        // value = d sc (q - 32).
        float s0 = q6k_scale(cur.sc0, o0, r0) * c01[0];
        s0 = fmaf(q6k_scale(cur.sc0, o0 + 1, r0), c01[1], s0);
        s0 = fmaf(q6k_scale(cur.sc0, o0, r0 + 2), c23[0], s0);
        s0 = fmaf(q6k_scale(cur.sc0, o0 + 1, r0 + 2), c23[1], s0);
        float s8 = q6k_scale(cur.sc8, o0, r0) * c01[2];
        s8 = fmaf(q6k_scale(cur.sc8, o0 + 1, r0), c01[3], s8);
        s8 = fmaf(q6k_scale(cur.sc8, o0, r0 + 2), c23[2], s8);
        s8 = fmaf(q6k_scale(cur.sc8, o0 + 1, r0 + 2), c23[3], s8);
        acc0 = fmaf(cur.d0, s0, acc0);
        acc8 = fmaf(cur.d8, s8, acc8);
        cur = nxt;
    }
    tile.store(acc0, acc8, y, rows, s_part);
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

#define QMMA6_KERNEL(SPLIT)                                                                     \
    extern "C" __global__ void __launch_bounds__(256) qgemv_mma_q6_k_1_s##SPLIT(                \
        const unsigned char* p0, const unsigned char* p1, const bf16* __restrict__ x,           \
        float* __restrict__ y, int rows, int k) {                                               \
        q6k_mma_gemv<SPLIT>(Planes{p0, p1, nullptr}, x, y, rows, k);                            \
    }
QMMA6_KERNEL(1)
QMMA6_KERNEL(2)
QMMA6_KERNEL(4)
QMMA6_KERNEL(8)
