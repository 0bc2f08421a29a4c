//! Against the python `gguf` package (fixtures/dequant, made by scripts/make_dequant_fixtures.py).

use super::*;
use crate::testing::repo_root;

fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn check(dtype: DType) {
    let path = repo_root().join(format!("fixtures/dequant/{dtype:?}.json"));
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
    dequantize_row(dtype, &bytes, &mut got);
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        // numpy may associate `d * scale * q` differently: a few ulps.
        let tol = 4.0 * f32::EPSILON * e.abs().max(1e-30);
        assert!(
            (g - e).abs() <= tol,
            "{dtype:?} element {i}: got {g}, gguf says {e}"
        );
    }
}

#[test]
fn every_type_matches_gguf_python() {
    use DType::*;
    for dtype in [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
    ] {
        check(dtype);
    }
}

#[test]
fn q8_k_is_scale_times_int8() {
    // The python package has no Q8_K; its definition is simple enough to state: f32 d, 256 i8.
    let mut block = 0.5f32.to_le_bytes().to_vec();
    block.extend((0..256).map(|i| (i as i32 - 128) as i8 as u8));
    block.extend([0u8; 32]); // bsums, unused by dequantization
    let mut out = vec![0.0; 256];
    dequantize_row(DType::Q8_K, &block, &mut out);
    for (i, v) in out.iter().enumerate() {
        assert_eq!(*v, (i as f32 - 128.0) * 0.5);
    }
}

#[test]
#[should_panic(expected = "byte length")]
fn wrong_byte_length_is_a_caller_bug() {
    dequantize_row(DType::Q4_0, &[0u8; 17], &mut [0.0; 32]);
}
