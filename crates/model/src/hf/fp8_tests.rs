use super::*;

fn f32_tensor(shape: &[usize], values: &[f32]) -> WeightTensor {
    WeightTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        storage: Storage::Owned(Arc::new(
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )),
    }
}

fn fp8(shape: &[usize], bytes: Vec<u8>) -> Fp8Tensor {
    Fp8Tensor {
        shape: shape.to_vec(),
        storage: Storage::Owned(Arc::new(bytes)),
    }
}

fn values(t: &WeightTensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F32);
    t.storage
        .bytes()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn scales_per_tensor_channel_and_block() {
    // A 4 x 6 matrix of ones (0x38) and twos (0x40) alternating along rows.
    let w = fp8(
        &[4, 6],
        (0..24)
            .map(|i| if (i / 6) % 2 == 0 { 0x38 } else { 0x40 })
            .collect(),
    );
    let config = Fp8Config { block: [2, 4] };
    let per_tensor = dequantize(&w, "s", &f32_tensor(&[], &[0.5]), config).unwrap();
    assert_eq!(
        values(&per_tensor)[..7],
        [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0]
    );
    let per_row = dequantize(&w, "s", &f32_tensor(&[4, 1], &[1.0, 2.0, 3.0, 4.0]), config).unwrap();
    let v = values(&per_row);
    assert_eq!((v[0], v[6], v[12], v[18]), (1.0, 4.0, 3.0, 8.0));
    // Blocks of 2 x 4: a 2 x 2 grid of scales, the last column of blocks 2 wide.
    let blocks = f32_tensor(&[2, 2], &[1.0, 10.0, 100.0, 1000.0]);
    let v = values(&dequantize(&w, "s", &blocks, config).unwrap());
    assert_eq!(v[0..6], [1.0, 1.0, 1.0, 1.0, 10.0, 10.0]);
    assert_eq!(v[6..12], [2.0, 2.0, 2.0, 2.0, 20.0, 20.0]);
    assert_eq!(v[18..24], [200.0, 200.0, 200.0, 200.0, 2000.0, 2000.0]);
}

#[test]
fn a_scale_of_no_known_layout_is_refused() {
    let w = fp8(&[4, 6], vec![0x38; 24]);
    let err = dequantize(
        &w,
        "x.weight_scale",
        &f32_tensor(&[3], &[1.0; 3]),
        Fp8Config { block: [2, 4] },
    )
    .unwrap_err();
    assert!(err.to_string().contains("x.weight_scale"), "{err}");
}

/// A checkpoint whose scales cover whole 128-column runs loads as FP8 blocks holding the same
/// values the f32 dequantization gives; a finer grid falls back to that dequantization.
#[test]
fn whole_runs_load_as_fp8_blocks_of_the_same_values() {
    let (rows, cols) = (256, 384);
    let bytes: Vec<u8> = (0..rows * cols)
        .map(|i| ((i * 37 + 11) % 256) as u8)
        .map(|b| if b & 0x7f == 0x7f { 0x38 } else { b })
        .collect();
    let w = fp8(&[rows, cols], bytes);
    let scales: Vec<(Vec<usize>, Vec<f32>, [usize; 2])> = vec![
        (vec![], vec![0.25], [128, 128]),
        (
            vec![rows, 1],
            (0..rows).map(|r| 0.5 + r as f32 / 64.0).collect(),
            [128, 128],
        ),
        (vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [128, 128]),
        (
            vec![4, 3],
            (0..12).map(|i| i as f32 + 0.5).collect(),
            [64, 128],
        ),
    ];
    for (shape, scale_values, block) in scales {
        let config = Fp8Config { block };
        let scale = f32_tensor(&shape, &scale_values);
        let loaded = load(&w, "s", &scale, config).unwrap();
        assert_eq!(loaded.dtype, DType::Fp8, "{shape:?}");
        let mut got = vec![0.0f32; rows * cols];
        crate::fp8::dequantize_blocks(loaded.storage.bytes(), &mut got);
        let want = values(&dequantize(&w, "s", &scale, config).unwrap());
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{shape:?}"
        );
    }
    // 64-column blocks: two scales inside one 128-column run.
    let fine = f32_tensor(&[2, 6], &[1.0; 12]);
    let loaded = load(&w, "s", &fine, Fp8Config { block: [128, 64] }).unwrap();
    assert_eq!(loaded.dtype, DType::F32);
}

#[test]
fn quantization_configs() {
    assert_eq!(fp8_config("{}").unwrap(), None);
    let hf = r#"{"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
        "activation_scheme": "dynamic", "weight_block_size": [128, 64]}}"#;
    assert_eq!(
        fp8_config(hf).unwrap(),
        Some(Fp8Config { block: [128, 64] })
    );
    let ct = r#"{"quantization_config": {"quant_method": "compressed-tensors",
        "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}}"#;
    assert_eq!(
        fp8_config(ct).unwrap(),
        Some(Fp8Config { block: [128, 128] })
    );
    let int4 = ct.replace(
        r#""num_bits": 8, "type": "float""#,
        r#""num_bits": 4, "type": "int""#,
    );
    assert!(fp8_config(&int4).is_err());
    let awq = r#"{"quantization_config": {"quant_method": "awq", "bits": 4}}"#;
    let err = fp8_config(awq).unwrap_err().to_string();
    assert!(err.contains("awq"), "{err}");
}
