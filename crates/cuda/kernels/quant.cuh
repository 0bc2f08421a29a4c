// Quantized weight formats (the GGUF types, FP8) as the CUDA backend keeps them: the same bits as
// the file, with some blocks split into planes (crates/cuda/src/quant.rs says which bytes go
// where) so that every load is a naturally aligned 16-, 4- or 2-byte word.
//
// Each format is a struct with the same static interface, used by quant_gemv.cu (GEMV that
// dequantizes in registers) and quant_dequant.cu (dequantize to bf16 for cuBLAS, embedding):
//   BLOCK      elements per quantization block (32 or 256)
//   UNITS      units per block: a unit is what one thread decodes at a time (32 or 64 elements)
//   GROUPS     groups of 8 consecutive elements per unit
//   Unit       the raw words of one unit, in registers
//   load(p, block, part) -> Unit      block = row * blocks_per_row + block in row
//   col(part, g)         first element of group g inside the block
//   group(u, part, g, w) the 8 values of group g, in f32 (the dequantizer's path)
// and, for the GEMVs, the same values as an affine map of small unsigned integers:
//   SUBS, SUB_GROUPS     a unit is SUBS runs of SUB_GROUPS groups sharing one scale
//   raw(u, part, g, q)   the 8 integers of group g as floats (exact)
//   affine(u, part, s, a, b)   value = a * q + b for every q of run s
// so that a product sums a * (q . x) + b * sum(x) per run: one multiply-add per weight.
// The arithmetic of `group` is the host dequantizer's (crates/model/src/dequant), operation by
// operation with the rounding spelled out (no fused multiply-add), so a dequantized weight
// equals the CPU's bit for bit.
#pragma once
#include "common.cuh"
#include <cuda_fp16.h>

// Up to three planes of one matrix; a format uses the first one, two or three.
struct Planes {
    const unsigned char* p0;
    const unsigned char* p1;
    const unsigned char* p2;
};

__device__ __forceinline__ float half_at(const unsigned char* p, i64 index) {
    return __half2float(reinterpret_cast<const __half*>(p)[index]);
}

// Byte i (0..15) of a 16-byte word.
__device__ __forceinline__ u32 byte_of(const uint4& v, int i) {
    const u32 w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
    return (w >> (8 * (i & 3))) & 0xffu;
}

// A file that defines QUANT_EXACT_ROUNDING before including this header (the dequantizer and
// the embedding lookup) gets the host's rounding exactly: no fused multiply-add, integer to
// float by conversion. The GEMVs leave it undefined: multiply-adds fuse, and a small unsigned
// integer becomes a float by its bits (2^23 + q, less 2^23: exact, and two full-rate
// instructions where a conversion runs at a sixteenth of the FMA rate), so a product there
// differs from the host's by f32 rounding only.
#ifdef QUANT_EXACT_ROUNDING
__device__ __forceinline__ float dq_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float dq_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float dq_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float qf(u32 q) { return (float)q; }
#else
__device__ __forceinline__ float dq_mul(float a, float b) { return a * b; }
__device__ __forceinline__ float dq_add(float a, float b) { return a + b; }
__device__ __forceinline__ float dq_sub(float a, float b) { return a - b; }
__device__ __forceinline__ float qf(u32 q) { return __int_as_float(0x4B000000u | q) - 8388608.0f; }
#endif

// (a & MASK) | bits in one instruction: written as (a & MASK) | BITS with both constants
// immediate, the compiler emits two, as an instruction takes one immediate.
template <u32 MASK>
__device__ __forceinline__ u32 and_or(u32 a, u32 bits) {
    u32 d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(MASK), "r"(bits));
    return d;
}

// Field I of WIDTH (4 or 8) bits of a word as a float, exact: the field's bits go into the
// mantissa of 2^(23 - WIDTH I) (a mask and an OR), and that power of two is subtracted. A field
// that would reach the exponent (bit 23 up) is shifted down by 12 (nibbles 5..7) or 16 (bytes
// 2, 3) bits first.
template <int WIDTH, int I>
__device__ __forceinline__ float field_f(u32 w) {
    constexpr int DROP = WIDTH == 4 ? 3 : 2;
    if constexpr (WIDTH * (I + 1) > 23) {
        return field_f<WIDTH, I - DROP>(w >> (WIDTH * DROP));
    } else {
        return __uint_as_float(and_or<(((1u << WIDTH) - 1) << (WIDTH * I))>(
                   w, (150u - WIDTH * I) << 23)) -
               (float)(1u << (23 - WIDTH * I));
    }
}
template <int I>
__device__ __forceinline__ float nibble_f(u32 w) { return field_f<4, I>(w); }
template <int I>
__device__ __forceinline__ float byte_f(u32 w) { return field_f<8, I>(w); }

// Word i (0..3) of a 16-byte word.
__device__ __forceinline__ u32 word_of(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The low (high = 0) or high (high = 1) nibbles of 8 consecutive bytes (words w0, w1), in
// byte order, as floats.
__device__ __forceinline__ void nibbles8(u32 w0, u32 w1, int high, float q[8]) {
    if (high) {
        q[0] = nibble_f<1>(w0); q[1] = nibble_f<3>(w0); q[2] = nibble_f<5>(w0); q[3] = nibble_f<7>(w0);
        q[4] = nibble_f<1>(w1); q[5] = nibble_f<3>(w1); q[6] = nibble_f<5>(w1); q[7] = nibble_f<7>(w1);
    } else {
        q[0] = nibble_f<0>(w0); q[1] = nibble_f<2>(w0); q[2] = nibble_f<4>(w0); q[3] = nibble_f<6>(w0);
        q[4] = nibble_f<0>(w1); q[5] = nibble_f<2>(w1); q[6] = nibble_f<4>(w1); q[7] = nibble_f<6>(w1);
    }
}

// 8 bytes (words w0, w1) as floats.
__device__ __forceinline__ void bytes8(u32 w0, u32 w1, float q[8]) {
    q[0] = byte_f<0>(w0); q[1] = byte_f<1>(w0); q[2] = byte_f<2>(w0); q[3] = byte_f<3>(w0);
    q[4] = byte_f<0>(w1); q[5] = byte_f<1>(w1); q[6] = byte_f<2>(w1); q[7] = byte_f<3>(w1);
}

// Q4_0: planes d (f16), qs (16 bytes). Element j < 16 is the low nibble of byte j, element
// j + 16 its high nibble; value (q - 8) * d.
struct Q4_0 {
    static constexpr int BLOCK = 32, UNITS = 1, GROUPS = 4;
    static constexpr int SUBS = 1, SUB_GROUPS = 4;
    struct Unit {
        float d;
        uint4 qs;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int) {
        return {half_at(p.p0, block), reinterpret_cast<const uint4*>(p.p1)[block]};
    }
    static __device__ __forceinline__ int col(int, int g) { return 8 * g; }
    static __device__ __forceinline__ void group(const Unit& u, int, int g, float w[8]) {
        const int first = 8 * (g & 1), shift = 4 * (g >> 1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 q = (byte_of(u.qs, first + j) >> shift) & 0xf;
            w[j] = dq_mul(qf(q) - 8.0f, u.d);
        }
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        const int w = 2 * (g & 1);
        nibbles8(word_of(u.qs, w), word_of(u.qs, w + 1), g >> 1, q);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int, int, float& a, float& b) {
        a = u.d;
        b = -8.0f * u.d;
    }
};

// Q4_1: planes d and m (two f16), qs; value q * d + m.
struct Q4_1 {
    static constexpr int BLOCK = 32, UNITS = 1, GROUPS = 4;
    static constexpr int SUBS = 1, SUB_GROUPS = 4;
    struct Unit {
        float d, m;
        uint4 qs;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int) {
        return {half_at(p.p0, 2 * block), half_at(p.p0, 2 * block + 1),
                reinterpret_cast<const uint4*>(p.p1)[block]};
    }
    static __device__ __forceinline__ int col(int, int g) { return 8 * g; }
    static __device__ __forceinline__ void group(const Unit& u, int, int g, float w[8]) {
        const int first = 8 * (g & 1), shift = 4 * (g >> 1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 q = (byte_of(u.qs, first + j) >> shift) & 0xf;
            w[j] = dq_add(dq_mul(qf(q), u.d), u.m);
        }
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        const int w = 2 * (g & 1);
        nibbles8(word_of(u.qs, w), word_of(u.qs, w + 1), g >> 1, q);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int, int, float& a, float& b) {
        a = u.d;
        b = u.m;
    }
};

// Q5_0: planes d (f16), qh (32 fifth bits), qs; element j takes bit j of qh (j + 16 for the
// high nibbles); value (q - 16) * d.
struct Q5_0 {
    static constexpr int BLOCK = 32, UNITS = 1, GROUPS = 4;
    static constexpr int SUBS = 1, SUB_GROUPS = 4;
    struct Unit {
        float d;
        u32 qh;
        uint4 qs;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int) {
        return {half_at(p.p0, block), reinterpret_cast<const u32*>(p.p1)[block],
                reinterpret_cast<const uint4*>(p.p2)[block]};
    }
    static __device__ __forceinline__ int col(int, int g) { return 8 * g; }
    // The 5-bit integer of element j of group g.
    static __device__ __forceinline__ u32 five(const Unit& u, int g, int j) {
        const int e = 8 * (g & 1) + j, high = g >> 1;
        const u32 lo = (byte_of(u.qs, e) >> (4 * high)) & 0xf;
        const u32 h = (u.qh >> (e + 16 * high)) & 1u;
        return lo | (h << 4);
    }
    static __device__ __forceinline__ void group(const Unit& u, int, int g, float w[8]) {
#pragma unroll
        for (int j = 0; j < 8; ++j) w[j] = dq_mul(qf(five(u, g, j)) - 16.0f, u.d);
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
#pragma unroll
        for (int j = 0; j < 8; ++j) q[j] = qf(five(u, g, j));
    }
    static __device__ __forceinline__ void affine(const Unit& u, int, int, float& a, float& b) {
        a = u.d;
        b = -16.0f * u.d;
    }
};

// Q8_0: planes d (f16), qs (32 signed bytes); value q * d.
struct Q8_0 {
    static constexpr int BLOCK = 32, UNITS = 1, GROUPS = 4;
    static constexpr int SUBS = 1, SUB_GROUPS = 4;
    struct Unit {
        float d;
        uint4 lo, hi;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int) {
        const uint4* qs = reinterpret_cast<const uint4*>(p.p1) + 2 * block;
        return {half_at(p.p0, block), qs[0], qs[1]};
    }
    static __device__ __forceinline__ int col(int, int g) { return 8 * g; }
    static __device__ __forceinline__ void group(const Unit& u, int, int g, float w[8]) {
        const uint4& v = g < 2 ? u.lo : u.hi;
        const int first = 8 * (g & 1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            // The signed byte plus 128, as an unsigned one.
            const u32 q = byte_of(v, first + j) ^ 0x80u;
            w[j] = dq_mul(qf(q) - 128.0f, u.d);
        }
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        // The signed bytes plus 128, as unsigned ones.
        const uint4& v = g < 2 ? u.lo : u.hi;
        const int w = 2 * (g & 1);
        bytes8(word_of(v, w) ^ 0x80808080u, word_of(v, w + 1) ^ 0x80808080u, q);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int, int, float& a, float& b) {
        a = u.d;
        b = -128.0f * u.d;
    }
};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block (12 packed bytes).
__device__ __forceinline__ void scale_min_k4(const uint4& head, int j, u32& sc, u32& m) {
    // head: d, dmin (4 bytes), then the 12 scale bytes: scale byte i is byte 4 + i of head.
    if (j < 4) {
        sc = byte_of(head, 4 + j) & 63;
        m = byte_of(head, 4 + j + 4) & 63;
    } else {
        sc = (byte_of(head, 4 + j + 4) & 0xf) | ((byte_of(head, 4 + j - 4) >> 6) << 4);
        m = (byte_of(head, 4 + j + 4) >> 4) | ((byte_of(head, 4 + j) >> 6) << 4);
    }
}

__device__ __forceinline__ float half_lo(u32 w) { return __half2float(__ushort_as_half(w & 0xffff)); }
__device__ __forceinline__ float half_hi(u32 w) { return __half2float(__ushort_as_half(w >> 16)); }

// Sub-block j's value map of a Q4_K / Q5_K block for the GEMVs: value = a * q + b with
// a = d * sc, b = -dmin * m.
__device__ __forceinline__ void affine_k4(const uint4& head, int j, float& a, float& b) {
    u32 sc, m;
    scale_min_k4(head, j, sc, m);
    a = half_lo(head.x) * qf(sc);
    b = -(half_hi(head.x) * qf(m));
}

// Q4_K, stored as in the file (144-byte blocks, 16-byte aligned): d, dmin, 12 scale bytes, then
// 128 bytes of nibbles. Unit `part` (0..3) is bytes 32 part .. 32 part + 32 of the nibbles:
// low nibbles are elements 64 part + l (sub-block 2 part), high nibbles 64 part + 32 + l
// (sub-block 2 part + 1); value d * sc * q - dmin * m.
struct Q4_K {
    static constexpr int BLOCK = 256, UNITS = 4, GROUPS = 8;
    static constexpr int SUBS = 2, SUB_GROUPS = 4;
    struct Unit {
        uint4 head, a, b;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int part) {
        const uint4* blk = reinterpret_cast<const uint4*>(p.p0 + block * 144);
        return {blk[0], blk[1 + 2 * part], blk[2 + 2 * part]};
    }
    static __device__ __forceinline__ int col(int part, int g) { return 64 * part + 8 * g; }
    static __device__ __forceinline__ void group(const Unit& u, int part, int g, float w[8]) {
        const int high = g >> 2;  // 0: low nibbles (sub-block 2 part), 1: high
        u32 sc, m;
        scale_min_k4(u.head, 2 * part + high, sc, m);
        const float d1 = dq_mul(half_lo(u.head.x), (float)sc);
        const float m1 = dq_mul(half_hi(u.head.x), (float)m);
        const int first = 8 * (g & 3);
        const uint4& v = first < 16 ? u.a : u.b;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 q = (byte_of(v, (first & 15) + j) >> (4 * high)) & 0xf;
            w[j] = dq_sub(dq_mul(d1, qf(q)), m1);
        }
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        const int first = 8 * (g & 3);
        const uint4& v = first < 16 ? u.a : u.b;
        const int w = (first & 15) >> 2;
        nibbles8(word_of(v, w), word_of(v, w + 1), g >> 2, q);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int part, int s, float& a, float& b) {
        affine_k4(u.head, 2 * part + s, a, b);
    }
};

// Q5_K, as in the file (176 bytes): d, dmin, 12 scale bytes, 32 bytes of fifth bits, 128 of
// nibbles. As Q4_K, plus bit 2 part (low) or 2 part + 1 (high) of qh[l] worth 16.
struct Q5_K {
    static constexpr int BLOCK = 256, UNITS = 4, GROUPS = 8;
    static constexpr int SUBS = 2, SUB_GROUPS = 4;
    struct Unit {
        uint4 head, h0, h1, a, b;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int part) {
        const uint4* blk = reinterpret_cast<const uint4*>(p.p0 + block * 176);
        return {blk[0], blk[1], blk[2], blk[3 + 2 * part], blk[4 + 2 * part]};
    }
    static __device__ __forceinline__ int col(int part, int g) { return 64 * part + 8 * g; }
    // The 5-bit integer of element j of group g: the nibble plus the fifth bit worth 16.
    static __device__ __forceinline__ u32 five(const Unit& u, int part, int g, int j) {
        const int high = g >> 2, first = 8 * (g & 3);
        const uint4& v = first < 16 ? u.a : u.b;
        const uint4& h = first < 16 ? u.h0 : u.h1;
        const int l = (first & 15) + j;
        return ((byte_of(v, l) >> (4 * high)) & 0xf) +
               (((byte_of(h, l) >> (2 * part + high)) & 1u) << 4);
    }
    static __device__ __forceinline__ void group(const Unit& u, int part, int g, float w[8]) {
        u32 sc, m;
        scale_min_k4(u.head, 2 * part + (g >> 2), sc, m);
        const float d1 = dq_mul(half_lo(u.head.x), (float)sc);
        const float m1 = dq_mul(half_hi(u.head.x), (float)m);
#pragma unroll
        for (int j = 0; j < 8; ++j) w[j] = dq_sub(dq_mul(d1, qf(five(u, part, g, j))), m1);
    }
    static __device__ __forceinline__ void raw(const Unit& u, int part, int g, float q[8]) {
#pragma unroll
        for (int j = 0; j < 8; ++j) q[j] = qf(five(u, part, g, j));
    }
    static __device__ __forceinline__ void affine(const Unit& u, int part, int s, float& a, float& b) {
        affine_k4(u.head, 2 * part + s, a, b);
    }
};

// Q6_K: planes [ql 128 | qh 64 | scales 16] (208 bytes) and d (f16). In half h (128 elements),
// for l in 0..32: element 32 r + l (r = 0..3) takes the low (r = 0, 1) or high (r = 2, 3)
// nibble of ql[64 h + l + 32 (r & 1)] and bits 2r, 2r+1 of qh[32 h + l], scale
// sc[8 h + l / 16 + 2 r]; value d * sc * (q - 32). Unit `part` = half part / 2, l in
// 16 (part % 2) .. + 16: four runs of 16 elements.
struct Q6_K {
    static constexpr int BLOCK = 256, UNITS = 4, GROUPS = 8;
    static constexpr int SUBS = 4, SUB_GROUPS = 2;
    struct Unit {
        uint4 lo, hi, qh, scales;
        float d;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int part) {
        const uint4* blk = reinterpret_cast<const uint4*>(p.p0 + block * 208);
        const int h = part >> 1, s = part & 1;
        return {blk[4 * h + s], blk[4 * h + 2 + s], blk[8 + 2 * h + s], blk[12],
                half_at(p.p1, block)};
    }
    // Group g: run r = g / 2, first l = 16 (part % 2) + 8 (g % 2).
    static __device__ __forceinline__ int col(int part, int g) {
        return 128 * (part >> 1) + 32 * (g >> 1) + 16 * (part & 1) + 8 * (g & 1);
    }
    static __device__ __forceinline__ void group(const Unit& u, int part, int g, float w[8]) {
        const int r = g >> 1, first = 8 * (g & 1);
        const int h = part >> 1, s = part & 1;
        const int sc = (int)(signed char)byte_of(u.scales, 8 * h + s + 2 * r);
        const float dsc = dq_mul(u.d, (float)sc);
        const uint4& v = (r & 1) ? u.hi : u.lo;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 ql = (byte_of(v, first + j) >> (4 * (r >> 1))) & 0xf;
            const u32 qh = (byte_of(u.qh, first + j) >> (2 * r)) & 3u;
            w[j] = dq_mul(dsc, qf(ql | (qh << 4)) - 32.0f);
        }
    }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        const int r = g >> 1, w = 2 * (g & 1);
        const uint4& v = (r & 1) ? u.hi : u.lo;
        // Four 6-bit values per word: the nibbles of ql beside bits 2r, 2r+1 of qh.
        u32 six[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const u32 lo = (word_of(v, w + i) >> (4 * (r >> 1))) & 0x0f0f0f0fu;
            const u32 hi = ((word_of(u.qh, w + i) >> (2 * r)) << 4) & 0x30303030u;
            six[i] = lo | hi;
        }
        bytes8(six[0], six[1], q);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int part, int s, float& a, float& b) {
        const int sc = (int)(signed char)byte_of(u.scales, 8 * (part >> 1) + (part & 1) + 2 * s);
        a = u.d * (qf((u32)(sc + 128)) - 128.0f);
        b = -32.0f * a;
    }
};

// An e4m3 byte as a float by its bits alone: its seven exponent and mantissa bits put at f32
// bits 26..20 and its sign at bit 31 make exactly e4m3 * 2^-120 (the exponent biases, 127 and
// 7, differ by 120; e4m3's subnormals land on f32's, which these kernels keep, as they are not
// built to flush them). Byte I is moved to the top of the word, an arithmetic shift by 4 puts
// its sign at bits 31..27 and the rest at 26..20, and the mask keeps bits 31 and 26..20.
template <int I>
__device__ __forceinline__ float e4m3_scaled(u32 w) {
    const int top = (int)(w << (24 - 8 * I));
    return __uint_as_float((u32)(top >> 4) & 0x87F00000u);
}

// 8 e4m3 bytes (words w0, w1) as floats, times 2^-120.
__device__ __forceinline__ void e4m3x8(u32 w0, u32 w1, float q[8]) {
    q[0] = e4m3_scaled<0>(w0); q[1] = e4m3_scaled<1>(w0); q[2] = e4m3_scaled<2>(w0); q[3] = e4m3_scaled<3>(w0);
    q[4] = e4m3_scaled<0>(w1); q[5] = e4m3_scaled<1>(w1); q[6] = e4m3_scaled<2>(w1); q[7] = e4m3_scaled<3>(w1);
}

// FP8 (ferrite_model::fp8): planes d (the f32 scale of each block of 128) and q (128 e4m3
// bytes); value e4m3(q) * d. Unit `part` (0..3) is bytes 32 part .. 32 part + 32 of q. The
// GEMV sums e4m3 * 2^-120 * x and multiplies by d * 2^120 (the loader refuses scales of 2^7 or
// more, where that would overflow); the dequantizer multiplies by 2^120 (exact), then by d:
// the host's one rounding.
struct FP8 {
    static constexpr int BLOCK = 128, UNITS = 4, GROUPS = 4;
    static constexpr int SUBS = 1, SUB_GROUPS = 4;
    struct Unit {
        float d;
        uint4 lo, hi;
    };
    static __device__ __forceinline__ Unit load(const Planes& p, i64 block, int part) {
        const uint4* q = reinterpret_cast<const uint4*>(p.p1) + block * 8 + 2 * part;
        return {reinterpret_cast<const float*>(p.p0)[block], q[0], q[1]};
    }
    static __device__ __forceinline__ int col(int part, int g) { return 32 * part + 8 * g; }
    static __device__ __forceinline__ void raw(const Unit& u, int, int g, float q[8]) {
        const uint4& v = g < 2 ? u.lo : u.hi;
        const int w = 2 * (g & 1);
        e4m3x8(word_of(v, w), word_of(v, w + 1), q);
    }
    static __device__ __forceinline__ void group(const Unit& u, int part, int g, float w[8]) {
        float q[8];
        raw(u, part, g, q);
#pragma unroll
        for (int j = 0; j < 8; ++j) w[j] = dq_mul(dq_mul(q[j], 0x1p120f), u.d);
    }
    static __device__ __forceinline__ void affine(const Unit& u, int, int, float& a, float& b) {
        a = u.d * 0x1p120f;
        b = 0.0f;
    }
};

// Whether a format's values have an offset (`affine`'s b): the GEMVs then sum x per run.
template <class Q>
struct HasOffset {
    static constexpr bool value = true;
};
template <>
struct HasOffset<FP8> {
    static constexpr bool value = false;
};
