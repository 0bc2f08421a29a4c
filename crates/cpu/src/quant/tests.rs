//! Dequantizers against the `gguf` Python package (fixtures/dequant, made by
//! scripts/make_dequant_fixtures.py).

use super::*;
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/dequant")
}

fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn check_type(dtype: DType) {
    let path = fixture_dir().join(format!("{dtype:?}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/make_dequant_fixtures.py)",
            path.display()
        )
    });
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bytes = decode_hex(doc["hex"].as_str().unwrap());
    let expected: Vec<f32> = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let mut got = vec![f32::NAN; expected.len()];
    dequantize_row(dtype, &bytes, &mut got).unwrap();
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        // The oracle may order a product of three factors differently: allow a few ulps.
        let tol = 4.0 * f32::EPSILON * e.abs().max(1e-30);
        assert!(
            (g - e).abs() <= tol,
            "{dtype:?} element {i}: got {g}, gguf says {e}"
        );
    }
}

#[test]
fn float_types_match_gguf() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        check_type(dtype);
    }
}

#[test]
fn legacy_quants_match_gguf() {
    for dtype in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
    ] {
        check_type(dtype);
    }
}

#[test]
fn k_quants_match_gguf() {
    for dtype in [
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ] {
        check_type(dtype);
    }
}

#[test]
fn unsupported_and_malformed_rows_are_errors() {
    let mut out = [0.0f32; 256];
    assert_eq!(
        row_dequantizer(DType::Q8_K).err(),
        Some(QuantError::Unsupported(DType::Q8_K))
    );
    assert!(matches!(
        dequantize_row(DType::Q4_0, &[0u8; 18], &mut out[..31]),
        Err(QuantError::RaggedRow { .. })
    ));
    assert!(matches!(
        dequantize_row(DType::Q4_K, &[0u8; 100], &mut out),
        Err(QuantError::WrongByteCount {
            expected: 144,
            got: 100,
            ..
        })
    ));
}

/// Every type with a SIMD dequantizer (in the kernels' layout).
#[cfg(target_arch = "x86_64")]
const SIMD_TYPES: [DType; 12] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Fp8,
];

/// The SIMD ISAs of this machine (failing the test where there is none: it would test nothing).
#[cfg(target_arch = "x86_64")]
fn simd_isas() -> Vec<crate::simd::Isa> {
    use crate::simd::{available_isas, Isa};
    let isas: Vec<Isa> = available_isas()
        .into_iter()
        .filter(|&isa| isa != Isa::Portable)
        .collect();
    assert!(
        !isas.is_empty(),
        "this machine has no SIMD ISA: the SIMD dequantizers go untested"
    );
    isas
}

/// The SIMD dequantizer of `isa`, the scalar one of the kernels' layout and the model crate's
/// GGML dequantizer give `ggml` (a row of `dtype`) the same bits (NaN payloads aside).
#[cfg(target_arch = "x86_64")]
fn assert_equals_reference(isa: crate::simd::Isa, dtype: DType, ggml: &[u8], what: &str) {
    let n = ggml.len() / dtype.block_bytes() * dtype.block_len();
    let Some(fast_fn) = simd_row_dequantizer(isa, dtype) else {
        panic!("{isa:?} has no dequantizer for {dtype:?}");
    };
    // The kernels read the 32-element types repacked; the reference reads GGML's layout.
    let kernel_bytes = repack::repack(dtype, ggml).unwrap_or_else(|| ggml.to_vec());
    let mut reference = vec![0.0f32; n];
    ferrite_model::dequant::dequantize_row(dtype, ggml, &mut reference);
    let mut repacked_scalar = vec![f32::NAN; n];
    portable_kernel_row_dequantizer(dtype).unwrap()(&kernel_bytes, &mut repacked_scalar);
    // Same bits, or NaN where the reference is NaN: a NaN's payload is not something Rust
    // (or LLVM, which may commute a multiply) keeps, so no code could promise it.
    let differs = |got: &[f32]| {
        got.iter()
            .zip(&reference)
            .position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
    };
    assert_eq!(
        differs(&repacked_scalar),
        None,
        "{dtype:?} ({what}): the repacked layout's scalar dequantizer differs from the model's"
    );
    let mut fast = vec![f32::NAN; n];
    fast_fn(&kernel_bytes, &mut fast);
    let first_difference = differs(&fast);
    assert_eq!(
        first_difference,
        None,
        "{isa:?} {dtype:?} ({what}): SIMD and the model's scalar dequantization differ \
         (SIMD {:?}, scalar {:?})",
        first_difference.map(|i| fast[i]),
        first_difference.map(|i| reference[i]),
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_dequantizers_equal_the_scalar_ones_bitwise() {
    let mut rng = crate::testing::rng(11);
    for isa in simd_isas() {
        for dtype in SIMD_TYPES {
            let n = 256 * 8;
            let tensor = crate::testing::random_tensor(&mut rng, dtype, 1, n, 1.0);
            assert_equals_reference(isa, dtype, tensor.storage.bytes(), "random");
        }
    }
}

/// f16 values at the edges: zeros, the smallest subnormal and normal, the largest finite,
/// infinities and a NaN, with both signs.
#[cfg(target_arch = "x86_64")]
const EXTREME_F16: [u16; 12] = [
    0x0000, 0x8000, 0x0001, 0x8001, 0x0400, 0x8400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3c00,
];

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_dequantizers_equal_the_model_on_extreme_scales() {
    use rand::Rng;
    let mut rng = crate::testing::rng(12);
    for isa in simd_isas() {
        for dtype in SIMD_TYPES {
            let n = 256 * 16;
            let tensor = crate::testing::random_tensor(&mut rng, dtype, 1, n, 1.0);
            let mut bytes = tensor.storage.bytes().to_vec();
            match dtype {
                // Plain floats: the extreme values themselves are the elements.
                DType::F16 | DType::BF16 => {
                    for (i, v) in bytes.chunks_exact_mut(2).enumerate() {
                        let bits = EXTREME_F16[i % EXTREME_F16.len()];
                        let bits = if dtype == DType::BF16 {
                            // The same classes of value in bf16's exponent range.
                            (f32::from(half::f16::from_bits(bits)).to_bits() >> 16) as u16
                        } else {
                            bits
                        };
                        v.copy_from_slice(&bits.to_le_bytes());
                    }
                }
                DType::F32 => {
                    let extremes = [
                        0.0,
                        -0.0,
                        f32::MIN_POSITIVE,
                        f32::from_bits(1),
                        f32::MAX,
                        f32::MIN,
                        f32::INFINITY,
                        f32::NEG_INFINITY,
                        f32::NAN,
                    ];
                    for (i, v) in bytes.chunks_exact_mut(4).enumerate() {
                        v.copy_from_slice(&extremes[i % extremes.len()].to_le_bytes());
                    }
                }
                // Quantized blocks: every scale field takes an extreme value, in turn and at
                // random, and some blocks have all quant bits set or clear.
                _ => {
                    let fields = crate::testing::f16_fields(dtype);
                    for (b, block) in bytes.chunks_exact_mut(dtype.block_bytes()).enumerate() {
                        for (f, &off) in fields.iter().enumerate() {
                            let pick = if b < EXTREME_F16.len() {
                                (b + f) % EXTREME_F16.len()
                            } else {
                                rng.random_range(0..EXTREME_F16.len())
                            };
                            block[off..off + 2].copy_from_slice(&EXTREME_F16[pick].to_le_bytes());
                        }
                        if b % 5 == 3 {
                            let fill = if b % 2 == 0 { 0x00 } else { 0xff };
                            for (i, byte) in block.iter_mut().enumerate() {
                                if !fields.iter().any(|&off| i == off || i == off + 1) {
                                    *byte = fill;
                                }
                            }
                        }
                    }
                }
            }
            assert_equals_reference(isa, dtype, &bytes, "extreme scales");
        }
    }
}
