//! The int8 path: SIMD tiles against the portable definition bit for bit, whatever the batch;
//! the result against the exact f32 product within the error int8 activations allow.

use ferrite_model::weights::DType;

use super::super::matmul::matmul;
use super::super::q8_activations::Q8Activations;
use super::super::quant_matrix::QuantMatrix;
use super::{available, dot_portable};
use crate::simd::{detected_isa, Isa};
use crate::testing::{random_tensor, random_vec, rng};

fn int8_matrix(dtype: DType, rows: usize, k: usize, seed: u64) -> QuantMatrix {
    let tensor = random_tensor(&mut rng(seed), dtype, rows, k, 1.0);
    let mut matrix = QuantMatrix::new(&tensor).unwrap();
    assert!(matrix.use_int8_activations());
    matrix
}

/// Every output of `matmul` on the int8 path against `dot_portable`, bit for bit, for each
/// batch size in `batches` (tiles of every height, a pair of weight rows and a lone one).
fn check_tiles_against_portable(k: usize, batches: &[usize], seed: u64) {
    let rows = 37;
    let most = batches.iter().copied().max().unwrap_or(0);
    for (i, dtype) in [DType::Q4_K, DType::Q6_K].into_iter().enumerate() {
        let matrix = int8_matrix(dtype, rows, k, seed + i as u64);
        let x = random_vec(&mut rng(seed + 10 + i as u64), most * k, 2.0);
        let mut acts = Q8Activations::default();
        acts.quantize(&x, most, k);
        let row_bytes = matrix.row_bytes();
        let expected: Vec<f32> = (0..most)
            .flat_map(|r| {
                let (matrix, acts) = (&matrix, &acts);
                (0..rows).map(move |c| {
                    let row = &matrix.bytes()[c * row_bytes..(c + 1) * row_bytes];
                    dot_portable(dtype, row, acts, r)
                })
            })
            .collect();
        for isa in [detected_isa(), Isa::Portable] {
            for &m in batches {
                let mut out = vec![0.0f32; m * rows];
                matmul(isa, &x, m, &matrix, &mut out);
                for (i, (&got, &want)) in out.iter().zip(&expected).enumerate() {
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{dtype:?} {isa:?} k={k} m={m}: row {} column {}: {got} vs {want}",
                        i / rows,
                        i % rows
                    );
                }
            }
        }
    }
}

#[test]
fn tiles_equal_the_portable_dot_for_every_batch_size() {
    if !available() {
        eprintln!("skipped: no AVX-512 VNNI on this machine");
        return;
    }
    let batches: Vec<usize> = (1..=21).collect();
    check_tiles_against_portable(512, &batches, 10);
}

#[test]
fn tiles_equal_the_portable_dot_when_the_activations_come_in_slices() {
    if !available() {
        eprintln!("skipped: no AVX-512 VNNI on this machine");
        return;
    }
    // 16,384 columns: a slice of activations that stays in L2 is 20-24 rows, so 45 rows pass
    // over the weights in three slices.
    check_tiles_against_portable(16_384, &[45], 50);
}

#[test]
fn int8_products_stay_within_the_activation_rounding_of_the_exact_ones() {
    if !available() {
        eprintln!("skipped: no AVX-512 VNNI on this machine");
        return;
    }
    let (rows, k, m) = (64, 1024, 3);
    for (i, dtype) in [DType::Q4_K, DType::Q6_K].into_iter().enumerate() {
        let tensor = random_tensor(&mut rng(30 + i as u64), dtype, rows, k, 1.0);
        let exact_matrix = QuantMatrix::new(&tensor).unwrap();
        let int8 = int8_matrix(dtype, rows, k, 30 + i as u64);
        let x = random_vec(&mut rng(40 + i as u64), m * k, 1.0);
        let (mut exact, mut approx) = (vec![0.0f32; m * rows], vec![0.0f32; m * rows]);
        matmul(detected_isa(), &x, m, &exact_matrix, &mut exact);
        matmul(detected_isa(), &x, m, &int8, &mut approx);
        // Each x moves by at most half a step (max|x| / 254 per block); the error is a sum of
        // those times the weights: bound it by Σ|w| · step / 2.
        let mut w = vec![0.0f32; rows * k];
        exact_matrix.dequantize_rows(0, rows, &mut w);
        for r in 0..m {
            let step: Vec<f32> = x[r * k..(r + 1) * k]
                .chunks(256)
                .map(|b| b.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 127.0)
                .collect();
            for c in 0..rows {
                let bound: f32 = (0..k)
                    .map(|e| w[c * k + e].abs() * step[e / 256] / 2.0)
                    .sum();
                let err = (approx[r * rows + c] - exact[r * rows + c]).abs();
                assert!(
                    err <= bound * 1.01 + 1e-4,
                    "{dtype:?} ({r}, {c}): int8 {} exact {} (error {err} > bound {bound})",
                    approx[r * rows + c],
                    exact[r * rows + c]
                );
                assert!(
                    err > 0.0 || bound == 0.0 || c > 0,
                    "the int8 path looks exact"
                );
            }
        }
    }
}
