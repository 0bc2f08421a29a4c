use super::*;

#[test]
fn e4m3_known_values() {
    // The OCP 8-bit floating point specification's e4m3: bias 7, no infinities.
    assert_eq!(e4m3_to_f32(0x00), 0.0);
    assert_eq!(e4m3_to_f32(0x38), 1.0); // exponent 7, mantissa 0
    assert_eq!(e4m3_to_f32(0x3c), 1.5);
    assert_eq!(e4m3_to_f32(0x40), 2.0);
    assert_eq!(e4m3_to_f32(0x7e), 448.0); // the largest finite value
    assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6)); // the smallest normal
    assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9)); // the smallest subnormal
    assert_eq!(e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9));
    assert_eq!(e4m3_to_f32(0xb8), -1.0);
    assert_eq!(e4m3_to_f32(0xfe), -448.0);
    assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
    assert!(e4m3_to_f32(0x80) == 0.0 && e4m3_to_f32(0x80).is_sign_negative());
}

#[test]
fn e4m3_is_monotonic_over_its_positive_bytes() {
    // 0x00..=0x7e count up through the subnormals and normals without gaps or repeats.
    let v: Vec<f32> = (0..=0x7eu8).map(e4m3_to_f32).collect();
    assert!(v.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(v.len(), 127);
}

#[test]
fn every_finite_byte_survives_a_round_trip() {
    for b in 0..=255u8 {
        if b & 0x7f == 0x7f {
            assert_eq!(f32_to_e4m3(e4m3_to_f32(b)), 0x7f, "NaN {b:#x}");
            continue;
        }
        assert_eq!(f32_to_e4m3(e4m3_to_f32(b)), b, "{b:#x}");
    }
}

#[test]
fn encoding_rounds_to_the_nearest_value_ties_to_even() {
    // Known answers: halfway cases go to the even mantissa, beyond 448 saturates.
    assert_eq!(f32_to_e4m3(1.0625), 0x38); // between 1 (m 0) and 1.125 (m 1): even is 1
    assert_eq!(f32_to_e4m3(1.1875), 0x3a); // between 1.125 and 1.25: even is 1.25
    assert_eq!(f32_to_e4m3(2f32.powi(-10)), 0x00); // half the smallest subnormal: to 0
    assert_eq!(f32_to_e4m3(3.0 * 2f32.powi(-10)), 0x02); // 1.5 steps: to 2
    assert_eq!(f32_to_e4m3(15.5 * 2f32.powi(-10)), 0x08); // rounds up into the normals
    assert_eq!(f32_to_e4m3(464.0), 0x7e);
    assert_eq!(f32_to_e4m3(-1e9), 0xfe);
    // Property: the chosen byte is a nearest finite value of every sample.
    let finite: Vec<f32> = (0..=0x7eu8).map(e4m3_to_f32).collect();
    let mut x = 0x2545_f491u32;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let v = f32::from_bits(0x3000_0000 + x % 0x1400_0000) * if x & 1 == 0 { 1.0 } else { -1.0 };
        let got = e4m3_to_f32(f32_to_e4m3(v));
        let a = v.abs().min(E4M3_MAX);
        let best = finite
            .iter()
            .map(|f| (f - a).abs())
            .fold(f32::INFINITY, f32::min);
        assert_eq!((got.abs() - a).abs(), best, "{v}");
        assert!(
            got == 0.0 || got.is_sign_negative() == v.is_sign_negative(),
            "{v}"
        );
    }
}

#[test]
fn per_channel_quantization_maps_each_row_max_to_448() {
    let (rows, cols) = (3, 256);
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| (((i * 7919) % 1000) as f32 / 1000.0 - 0.5) * (1 + i / cols) as f32)
        .collect();
    let t = quantize_per_channel(rows, cols, &values);
    assert_eq!((t.dtype, t.shape.clone()), (DType::Fp8, vec![rows, cols]));
    assert_eq!(t.storage.bytes().len(), rows * 2 * BLOCK_BYTES);
    let mut back = vec![0.0f32; rows * cols];
    dequantize_blocks(t.storage.bytes(), &mut back);
    for r in 0..rows {
        let row = &values[r * cols..(r + 1) * cols];
        let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = max / E4M3_MAX;
        for (&w, &q) in row.iter().zip(&back[r * cols..(r + 1) * cols]) {
            // Within half a step: 2^-4 relative for normals, 2^-10 x scale for subnormals.
            let bound = (w.abs() / 16.0).max(scale * 2f32.powi(-10)) * 1.0001;
            assert!((w - q).abs() <= bound, "row {r}: {w} -> {q}");
        }
        let at_max = row.iter().position(|v| v.abs() == max).unwrap();
        assert_eq!(back[r * cols + at_max].abs(), max, "row {r}");
    }
}

#[test]
fn quantize_linear_layers_takes_projections_only_and_refuses_quantized_files() {
    let matrix = |dtype: DType, rows: usize, cols: usize| WeightTensor {
        dtype,
        shape: vec![rows, cols],
        storage: Storage::Owned(Arc::new(vec![0u8; dtype.row_bytes(cols) * rows])),
    };
    let mut w = ModelWeights::default();
    for name in [
        "blk.0.attn_q.weight",
        "blk.0.ffn_down.weight",
        "blk.1.ffn_up.3.weight",
    ] {
        w.tensors.insert(name.into(), matrix(DType::BF16, 4, 256));
    }
    w.tensors
        .insert("blk.0.attn_k.weight".into(), matrix(DType::F32, 4, 96));
    for name in [
        "token_embd.weight",
        "output.weight",
        "blk.0.ffn_gate_inp.weight",
    ] {
        w.tensors.insert(name.into(), matrix(DType::BF16, 4, 256));
    }
    assert_eq!(quantize_linear_layers(&mut w).unwrap(), 3);
    let dtype = |n: &str| w.tensors[n].dtype;
    assert_eq!(dtype("blk.0.attn_q.weight"), DType::Fp8);
    assert_eq!(dtype("blk.1.ffn_up.3.weight"), DType::Fp8);
    assert_eq!(dtype("blk.0.attn_k.weight"), DType::F32); // 96 columns: not whole blocks
    assert_eq!(dtype("token_embd.weight"), DType::BF16);
    assert_eq!(dtype("blk.0.ffn_gate_inp.weight"), DType::BF16);
    // Already FP8 now: a second pass is refused, naming the tensor.
    let err = quantize_linear_layers(&mut w).unwrap_err().to_string();
    assert!(err.contains("Fp8"), "{err}");
    let mut tiny = ModelWeights::default();
    tiny.tensors
        .insert("blk.0.attn_q.weight".into(), matrix(DType::F32, 4, 64));
    assert!(matches!(
        quantize_linear_layers(&mut tiny),
        Err(QuantizeError::NothingToQuantize)
    ));
}
