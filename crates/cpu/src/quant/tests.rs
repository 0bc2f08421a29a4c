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

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_dequantizers_equal_the_scalar_ones_bitwise() {
    use crate::kernels::simd::available_isas;
    let mut rng = crate::test_util::rng(11);
    let dtypes = [
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
    ];
    let isas = available_isas();
    assert!(
        isas.len() > 1,
        "this machine has no SIMD ISA: the SIMD dequantizers go untested"
    );
    for isa in isas {
        for dtype in dtypes {
            let Some(fast_fn) = simd_row_dequantizer(isa, dtype) else {
                assert_eq!(isa, crate::kernels::simd::Isa::Portable, "{dtype:?}");
                continue;
            };
            let n = 256 * 8;
            let tensor = crate::test_util::random_tensor(&mut rng, dtype, 1, n, 1.0);
            let ggml = tensor.storage.bytes();
            // The kernels read the 32-element types repacked; the oracle is GGML's layout.
            let kernel_bytes = repack::repack(dtype, ggml).unwrap_or_else(|| ggml.to_vec());
            let (mut fast, mut scalar) = (vec![f32::NAN; n], vec![0.0f32; n]);
            fast_fn(&kernel_bytes, &mut fast);
            portable_row_dequantizer(dtype).unwrap()(ggml, &mut scalar);
            let mut repacked_scalar = vec![f32::NAN; n];
            portable_kernel_row_dequantizer(dtype).unwrap()(&kernel_bytes, &mut repacked_scalar);
            assert!(
                repacked_scalar
                    .iter()
                    .zip(&scalar)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{dtype:?}: the repacked layout's scalar dequantizer differs from GGML's"
            );
            let first_difference = fast
                .iter()
                .zip(&scalar)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert_eq!(
                first_difference, None,
                "{isa:?} {dtype:?}: SIMD and scalar dequantization differ"
            );
        }
    }
}
