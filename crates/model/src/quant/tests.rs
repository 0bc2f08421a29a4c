use super::*;

#[test]
fn every_dtype_has_its_own_descriptor() {
    for (i, f) in FORMATS.iter().enumerate() {
        // By name, not address: a debug build may give a `const` descriptor two addresses.
        let found = format(f.dtype);
        assert!(found.dtype == f.dtype && found.name == f.name, "{}", f.name);
        for other in &FORMATS[i + 1..] {
            assert_ne!(f.dtype, other.dtype);
            assert!(f.ggml_type.is_none() || f.ggml_type != other.ggml_type);
        }
    }
}

#[test]
fn ggml_ids_and_block_sizes_are_ggmls() {
    // ggml.h's `enum ggml_type` and ggml.c's type traits (blck_size, type_size).
    let known = [
        (0, DType::F32, 1, 4),
        (1, DType::F16, 1, 2),
        (2, DType::Q4_0, 32, 18),
        (3, DType::Q4_1, 32, 20),
        (6, DType::Q5_0, 32, 22),
        (7, DType::Q5_1, 32, 24),
        (8, DType::Q8_0, 32, 34),
        (10, DType::Q2_K, 256, 84),
        (11, DType::Q3_K, 256, 110),
        (12, DType::Q4_K, 256, 144),
        (13, DType::Q5_K, 256, 176),
        (14, DType::Q6_K, 256, 210),
        (15, DType::Q8_K, 256, 292),
        (30, DType::BF16, 1, 2),
    ];
    for (id, dtype, len, bytes) in known {
        assert_eq!(from_ggml_type(id), Some(dtype), "id {id}");
        assert_eq!(
            (dtype.block_len(), dtype.block_bytes()),
            (len, bytes),
            "{dtype:?}"
        );
    }
    assert_eq!(from_ggml_type(4), None); // Q4_2, removed from GGML
    assert_eq!(from_name("q4_k"), Some(DType::Q4_K));
    assert_eq!(from_name("fp8"), Some(DType::Fp8));
}

#[test]
fn fields_fill_the_block() {
    for f in FORMATS {
        let bytes: usize = f.fields.iter().map(|(_, b)| b).sum();
        assert_eq!(bytes, f.block_bytes, "{}", f.name);
    }
}
