//! The bf16 path: against a float64 product of the same bf16-rounded inputs (only the f32
//! sums differ), against the exact product within the two roundings' bound, the same bits for
//! a row in any batch of more than 16 rows, and in smaller ones the exact path's bits (types
//! the bf16 decode kernel does not take; its own tests: `bf16_decode/tests.rs`).

use ferrite_model::weights::DType;

use super::super::amx::{from_bf16, to_bf16};
use super::super::matmul::matmul;
use super::super::quant_matrix::QuantMatrix;
use super::available;
use crate::simd::detected_isa;
use crate::testing::{bf16_matrix, random_tensor, random_vec, rng};

const TYPES: [DType; 7] = [
    DType::Q4_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4_K,
    DType::Q6_K,
    DType::BF16,
    DType::F32,
];

#[test]
fn products_are_the_bf16_inputs_summed_in_f32() {
    if !available() {
        eprintln!("skipped: no AMX bf16 tiles on this machine");
        return;
    }
    for (i, dtype) in TYPES.into_iter().enumerate() {
        for k in [256, 96, 1024] {
            if k % dtype.block_len() != 0 {
                continue;
            }
            let (matrix, w) = bf16_matrix(dtype, k, 7 + i as u64);
            let rows = matrix.rows();
            let m = 37;
            let x = random_vec(&mut rng(100 + i as u64), m * k, 2.0);
            let mut out = vec![0.0f32; m * rows];
            matmul(detected_isa(), &x, m, &matrix, &mut out);
            let round = |v: f32| from_bf16(to_bf16(v)) as f64;
            for r in 0..m {
                for c in 0..rows {
                    let (xr, wr) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
                    let rounded: f64 = xr.iter().zip(wr).map(|(&a, &b)| round(a) * round(b)).sum();
                    let exact: f64 = xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum();
                    let scale: f64 = xr
                        .iter()
                        .zip(wr)
                        .map(|(&a, &b)| (a as f64 * b as f64).abs())
                        .sum();
                    let got = out[r * rows + c] as f64;
                    // f32 sums of k terms; then two roundings of 2⁻⁹ each against the exact.
                    assert!(
                        (got - rounded).abs() <= k as f64 * 6e-8 * scale + 1e-30,
                        "{dtype:?} k={k} [{r},{c}]: {got} vs {rounded} (bf16 inputs)"
                    );
                    assert!(
                        (got - exact).abs() <= 2.0f64.powi(-8) * scale,
                        "{dtype:?} k={k} [{r},{c}]: {got} vs {exact} (exact)"
                    );
                }
            }
        }
    }
}

#[test]
fn a_row_gives_the_same_bits_in_every_batch_of_more_than_16_rows() {
    if !available() {
        eprintln!("skipped: no AMX bf16 tiles on this machine");
        return;
    }
    let k = 512;
    for (i, dtype) in TYPES.into_iter().enumerate() {
        let (matrix, _) = bf16_matrix(dtype, k, 40 + i as u64);
        let rows = matrix.rows();
        let x = random_vec(&mut rng(50 + i as u64), 60 * k, 2.0);
        let mut whole = vec![0.0f32; 60 * rows];
        matmul(detected_isa(), &x, 60, &matrix, &mut whole);
        for (start, m) in [(0, 17), (3, 20), (20, 32), (1, 33), (7, 53)] {
            let mut part = vec![0.0f32; m * rows];
            matmul(detected_isa(), &x[start * k..], m, &matrix, &mut part);
            for (j, (&got, &want)) in part.iter().zip(&whole[start * rows..]).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{dtype:?}: row {} column {} of a batch of {m}",
                    start + j / rows,
                    j % rows
                );
            }
        }
    }
}

/// Products of up to 16 rows (decode) of the types the bf16 decode kernel does not take keep
/// the exact path's kernels and bits.
#[test]
fn decode_sized_products_are_exact() {
    if !available() {
        eprintln!("skipped: no AMX bf16 tiles on this machine");
        return;
    }
    let k = 256;
    for (i, dtype) in TYPES.into_iter().enumerate() {
        if super::super::bf16_decode::supports(dtype) && super::super::bf16_decode::available() {
            continue;
        }
        let (matrix, _) = bf16_matrix(dtype, k, 60 + i as u64);
        let exact =
            QuantMatrix::new(&random_tensor(&mut rng(60 + i as u64), dtype, 37, k, 1.0)).unwrap();
        let rows = matrix.rows();
        for m in [1, 2, 7, 16] {
            let x = random_vec(&mut rng(70 + m as u64), m * k, 2.0);
            let (mut fast, mut reference) = (vec![0.0f32; m * rows], vec![0.0f32; m * rows]);
            matmul(detected_isa(), &x, m, &matrix, &mut fast);
            matmul(detected_isa(), &x, m, &exact, &mut reference);
            assert_eq!(
                fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                reference.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{dtype:?}, {m} rows"
            );
        }
    }
}
