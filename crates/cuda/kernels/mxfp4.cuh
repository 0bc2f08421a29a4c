// MXFP4 (gpt-oss's experts; GGML's type 39) decoded into bf16 for the tensor cores.
//
// A block is 32 weights: an E8M0 exponent e and 16 bytes of E2M1 codes, element j (< 16) the
// low nibble of byte j and element j + 16 its high nibble; weight = E2M1[code] * 2^(e - 127)
// (crates/model/src/quant/mxfp4.rs, the host's reference). Every such weight is a bf16 value
// (two significant bits), so decoding is exact and the product's only rounding is the mma's
// f32 sums, as for bf16 weights. On the device a block's exponents and codes live in two
// planes (crate::weights::moe): codes [blocks][16 bytes], exponents [blocks] bytes.
#pragma once
#include "common.cuh"

// Four codes (nibbles 0..3 of `codes`, sign in each nibble's bit 3) as two bf16 pairs
// (elements 0, 1 in `p01`, 2, 3 in `p23`, the lower element in the low half), scaled by
// 2^(e - 127) through the exponent field: exact while every result stays a normal number
// (2 <= e <= 252; mxfp4_words falls back to floats otherwise).
__device__ __forceinline__ void mxfp4_quad(u32 codes, u32 delta2, u32& p01, u32& p23) {
    const u32 sel = codes & 0x7777u;
    // The magnitudes' bf16 bytes, by code 0..7 (0, 0.5, 1, 1.5, 2, 3, 4, 6): high bytes
    // 00 3F 3F 3F 40 40 40 40, low bytes 00 00 80 C0 00 40 80 C0.
    const u32 hi = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);
    const u32 lo = __byte_perm(0xC0800000u, 0xC0804000u, sel);
    p01 = __byte_perm(lo, hi, 0x5140);
    p23 = __byte_perm(lo, hi, 0x7362);
    // Scale the non-zero halves (zero stays zero), then put the signs back.
    p01 = __vadd2(p01, delta2 & __vcmpne2(p01, 0u));
    p23 = __vadd2(p23, delta2 & __vcmpne2(p23, 0u));
    p01 |= ((codes << 12) & 0x8000u) | ((codes << 24) & 0x80000000u);
    p23 |= ((codes << 4) & 0x8000u) | ((codes << 16) & 0x80000000u);
}

// Nibbles 0, 2, 4, 6 (high = 0) or 1, 3, 5, 7 (high = 1) of `w`, i.e. one nibble of each of
// its four bytes, packed as nibbles 0..3.
__device__ __forceinline__ u32 mxfp4_codes(u32 w, int high) {
    const u32 n = (high ? w >> 4 : w) & 0x0F0F0F0Fu;
    return __byte_perm(n | (n >> 4), 0u, 0x4420);
}

// Slow path for exponents whose weights leave bf16's normal range: each weight through f32,
// as the host decodes it.
__device__ __forceinline__ u32 mxfp4_pair_slow(u32 codes, int i, float scale) {
    auto value = [&](u32 c) {
        const u32 m = c & 7u;
        const float mag = m < 2 ? 0.5f * (float)m : (float)((2u + (m & 1u)) << ((m >> 1) - 1)) * 0.5f;
        return (c & 8u ? -mag : mag) * scale;
    };
    const __nv_bfloat162 v =
        __floats2bfloat162_rn(value(codes >> (8 * i) & 15u), value(codes >> (8 * i + 4) & 15u));
    return *reinterpret_cast<const u32*>(&v);
}

// One block (16 code bytes `qs`, exponent `e`) as 32 bf16 in element order: word i of `out`
// holds elements 8 i .. 8 i + 7.
__device__ __forceinline__ void mxfp4_words(const uint4& qs, u32 e, uint4 (&out)[4]) {
    const u32 w[4] = {qs.x, qs.y, qs.z, qs.w};
    if (e >= 2u && e <= 252u) {
        const u32 delta = ((e - 127u) << 7) & 0xFFFFu;
        const u32 delta2 = delta | (delta << 16);
        // Byte b's low nibble is element b, its high nibble element b + 16: word b / 4 of
        // the codes gives elements 4 (b / 4) .. + 3, and 16 + the same.
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            u32 p[8];
#pragma unroll
            for (int q = 0; q < 4; ++q) mxfp4_quad(mxfp4_codes(w[q], half), delta2, p[2 * q], p[2 * q + 1]);
            out[2 * half] = make_uint4(p[0], p[1], p[2], p[3]);
            out[2 * half + 1] = make_uint4(p[4], p[5], p[6], p[7]);
        }
        return;
    }
    // 2^(e - 127), e = 0 being 2^-127 (a subnormal), as the host's e8m0.
    const float scale = e == 0u ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        u32 p[8];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            // Codes of elements 4 q .. 4 q + 3 (+ 16 half) as nibbles 0..3: pairs (0, 1) and
            // (2, 3) are bytes 0 and 1.
            const u32 c = mxfp4_codes(w[q], half);
            p[2 * q] = mxfp4_pair_slow(c, 0, scale);
            p[2 * q + 1] = mxfp4_pair_slow(c, 1, scale);
        }
        out[2 * half] = make_uint4(p[0], p[1], p[2], p[3]);
        out[2 * half + 1] = make_uint4(p[4], p[5], p[6], p[7]);
    }
}
