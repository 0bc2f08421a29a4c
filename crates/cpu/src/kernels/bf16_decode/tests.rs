//! The bf16 decode kernel: against a float64 product of bf16-rounded x and the exact weights
//! (the only rounding the kernel claims), clearly closer to it than to the unrounded product,
//! and the same bits for a row whatever the batch of up to 16 rows. `matmul` sends it one-row
//! products only (`BF16_DECODE_MAX_ROWS`), so products of several rows call the kernel itself;
//! one-row products also go through `matmul`, which must pick it.

use ferrite_model::weights::DType;

use super::super::amx::{from_bf16, to_bf16};
use super::super::bf16_activations::Bf16Activations;
use super::super::matmul::matmul;
use super::super::qgemm::{OutMatrix, Rounded, Task};
use super::super::quant_matrix::QuantMatrix;
use super::{available, run};
use crate::simd::detected_isa;
use crate::testing::{bf16_matrix, random_vec, rng};

/// `x · matrixᵀ` for `m` rows of x by the kernel itself, all columns in one task.
fn kernel_product(matrix: &QuantMatrix, x: &[f32], m: usize) -> Vec<f32> {
    let (k, rows) = (matrix.cols(), matrix.rows());
    let mut acts = Bf16Activations::default();
    acts.convert_with_sums(x, m, k);
    let mut out = vec![0.0f32; m * rows];
    let task = Task {
        matrix,
        x,
        m,
        c0: 0,
        c1: rows,
        out: OutMatrix {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            n: rows,
        },
        acts: Rounded::Bf16Decode(&acts),
    };
    run(&task, &acts);
    out
}

const TYPES: [DType; 2] = [DType::Q4_K, DType::Q6_K];

/// Whether the bf16 path runs here and takes this kernel for decode.
fn here() -> bool {
    let ok = available() && super::super::bf16_gemm::available();
    if !ok {
        eprintln!("skipped: no AMX tiles or no AVX-512 BF16 on this machine");
    }
    ok
}

#[test]
fn products_are_bf16_x_times_the_exact_weights() {
    if !here() {
        return;
    }
    for (i, dtype) in TYPES.into_iter().enumerate() {
        for k in [256, 1024, 4096] {
            let (matrix, w) = bf16_matrix(dtype, k, 7 + i as u64);
            let rows = matrix.rows();
            for m in [1, 3, 16] {
                let x = random_vec(&mut rng(100 + (i * 31 + m) as u64), m * k, 2.0);
                let out = if m == 1 {
                    let mut out = vec![0.0f32; rows];
                    matmul(detected_isa(), &x, m, &matrix, &mut out);
                    out
                } else {
                    kernel_product(&matrix, &x, m)
                };
                let round = |v: f32| from_bf16(to_bf16(v)) as f64;
                let (mut err, mut rounding) = (0.0f64, 0.0f64);
                for r in 0..m {
                    for c in 0..rows {
                        let (xr, wr) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
                        let want: f64 = xr.iter().zip(wr).map(|(&a, &b)| round(a) * b as f64).sum();
                        let exact: f64 =
                            xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum();
                        let scale: f64 = xr
                            .iter()
                            .zip(wr)
                            .map(|(&a, &b)| (a as f64 * b as f64).abs())
                            .sum();
                        let got = out[r * rows + c] as f64;
                        // f32 sums with the 128 offset: well inside x's own rounding (2⁻⁹).
                        assert!(
                            (got - want).abs() <= 2.0f64.powi(-14) * scale + 1e-30,
                            "{dtype:?} k={k} m={m} [{r},{c}]: {got} vs {want}"
                        );
                        err += (got - want).abs();
                        rounding += (want - exact).abs();
                    }
                }
                // The kernel computes the bf16 product, not another one within the bound.
                assert!(
                    err < rounding / 20.0,
                    "{dtype:?} k={k} m={m}: error {err} against x's rounding {rounding}"
                );
            }
        }
    }
}

#[test]
fn a_row_gives_the_same_bits_in_every_batch_of_up_to_16_rows() {
    if !here() {
        return;
    }
    let k = 512;
    for (i, dtype) in TYPES.into_iter().enumerate() {
        let (matrix, _) = bf16_matrix(dtype, k, 40 + i as u64);
        let rows = matrix.rows();
        let x = random_vec(&mut rng(50 + i as u64), 16 * k, 2.0);
        // One-row products through matmul (which must take this kernel for them).
        let mut alone = vec![0.0f32; 16 * rows];
        for r in 0..16 {
            matmul(
                detected_isa(),
                &x[r * k..],
                1,
                &matrix,
                &mut alone[r * rows..],
            );
        }
        for (start, m) in [(0, 16), (3, 5), (1, 2), (6, 3), (8, 8), (2, 13)] {
            let part = kernel_product(&matrix, &x[start * k..(start + m) * k], m);
            for (j, (&got, &want)) in part.iter().zip(&alone[start * rows..]).enumerate() {
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
