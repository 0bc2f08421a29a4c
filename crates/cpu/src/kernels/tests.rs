//! Kernels against naive f64 references, SIMD against the portable path, and batch invariance.

use ferrite_model::weights::DType;

use super::activation::{gelu_tanh_mul, silu_mul};
use super::attention::{attend, KvSource, Window};
use super::matmul::{matmul, matmul_group, MatmulJob};
use super::norm::{rms_norm, rms_norm_in_place};
use super::quant_matrix::QuantMatrix;
use crate::simd::{available_isas, axpy, detected_isa, dot, Isa, Tile};
use crate::testing::{random_tensor, random_vec, rng};

fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

fn abs_dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum()
}

#[test]
fn dot_matches_f64_and_simd_matches_portable_bitwise() {
    let mut r = rng(1);
    for k in [1, 7, 8, 9, 31, 64, 577, 1000] {
        let a = random_vec(&mut r, k, 1.0);
        let b = random_vec(&mut r, k, 1.0);
        let got = dot(detected_isa(), &a, &b) as f64;
        let tol = 1e-6 * abs_dot_f64(&a, &b) + 1e-30;
        assert!((got - dot_f64(&a, &b)).abs() <= tol, "k={k}");
        for isa in available_isas() {
            assert_eq!(
                dot(isa, &a, &b).to_bits(),
                dot(Isa::Portable, &a, &b).to_bits(),
                "k={k}: {isa:?} and portable dot differ"
            );
        }
    }
}

#[test]
fn tile_shapes_agree_with_single_dots_bitwise() {
    let mut r = rng(2);
    let k = 45;
    let x = random_vec(&mut r, 6 * k, 1.0);
    let w = random_vec(&mut r, 4 * k, 1.0);
    for (isa, rows, cols) in available_isas()
        .into_iter()
        .flat_map(|isa| (1..=6).flat_map(move |rows| (1..=4).map(move |cols| (isa, rows, cols))))
    {
        {
            let sums = Tile {
                x: &x,
                x_stride: k,
                rows,
                w: &w,
                w_stride: k,
                cols,
                k,
            }
            .compute(isa);
            for rr in 0..rows {
                for c in 0..cols {
                    let single = dot(
                        Isa::Portable,
                        &x[rr * k..(rr + 1) * k],
                        &w[c * k..(c + 1) * k],
                    );
                    assert_eq!(
                        sums[rr][c].to_bits(),
                        single.to_bits(),
                        "{isa:?} tile {rows}x{cols} at ({rr},{c})"
                    );
                }
            }
        }
    }
}

#[test]
fn axpy_matches_fma_reference() {
    let mut r = rng(3);
    let v = random_vec(&mut r, 37, 1.0);
    let mut acc = random_vec(&mut r, 37, 1.0);
    let expected: Vec<f32> = acc
        .iter()
        .zip(&v)
        .map(|(a, x)| 0.3f32.mul_add(*x, *a))
        .collect();
    axpy(detected_isa(), 0.3, &v, &mut acc);
    assert_eq!(acc, expected);
}

fn dequantized(matrix: &QuantMatrix) -> Vec<f32> {
    let mut w = vec![0.0; matrix.rows() * matrix.cols()];
    matrix.dequantize_rows(0, matrix.rows(), &mut w);
    w
}

#[test]
fn matmul_matches_f64_for_every_type_and_odd_sizes() {
    let mut r = rng(4);
    let cases = [
        (DType::F32, 48),
        (DType::F16, 64),
        (DType::Q4_0, 96),
        (DType::Q4_1, 64),
        (DType::Q5_0, 64),
        (DType::Q8_0, 96),
        (DType::Q4_K, 256),
        (DType::Q6_K, 512),
        (DType::BF16, 32),
        (DType::Q5_K, 256),
        (DType::Q3_K, 256),
    ];
    for (dtype, k) in cases {
        for (m, n) in [(1, 1), (3, 7), (5, 131), (17, 66)] {
            let matrix = QuantMatrix::new(&random_tensor(&mut r, dtype, n, k, 1.0)).unwrap();
            let w = dequantized(&matrix);
            let x = random_vec(&mut r, m * k, 1.0);
            let mut out = vec![f32::NAN; m * n];
            matmul(detected_isa(), &x, m, &matrix, &mut out);
            for i in 0..m {
                for j in 0..n {
                    let (xr, wr) = (&x[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]);
                    let got = out[i * n + j] as f64;
                    let tol = 1e-5 * abs_dot_f64(xr, wr) + 1e-30;
                    assert!(
                        (got - dot_f64(xr, wr)).abs() <= tol,
                        "{dtype:?} m={m} n={n} ({i},{j}): {got}"
                    );
                }
            }
        }
    }
}

/// Every ISA, on the fused (few rows) and the panel (many rows) path, gives the portable bits.
#[test]
fn matmul_is_bitwise_the_same_on_every_isa_and_path() {
    let mut r = rng(14);
    let dtypes = [
        (DType::Q4_0, 64),
        (DType::Q4_1, 96),
        (DType::Q5_0, 64),
        (DType::Q5_1, 64),
        (DType::Q8_0, 64),
        (DType::Q4_K, 512),
        (DType::Q5_K, 256),
        (DType::Q6_K, 256),
        (DType::Q2_K, 256),
        (DType::F32, 80),
        (DType::F16, 48),
        (DType::BF16, 64),
    ];
    for (dtype, k) in dtypes {
        let n = 37;
        let matrix = QuantMatrix::new(&random_tensor(&mut r, dtype, n, k, 1.0)).unwrap();
        // Fused in groups of 4 (and 8 on AVX-512) up to 16 rows, the panel beyond.
        for m in [1, 2, 3, 4, 5, 8, 9, 12, 13, 16, 17] {
            let x = random_vec(&mut r, m * k, 1.0);
            let mut reference = vec![f32::NAN; m * n];
            matmul(Isa::Portable, &x, m, &matrix, &mut reference);
            for isa in available_isas() {
                let mut out = vec![f32::NAN; m * n];
                matmul(isa, &x, m, &matrix, &mut out);
                let diff = out
                    .iter()
                    .zip(&reference)
                    .position(|(a, b)| a.to_bits() != b.to_bits());
                assert_eq!(diff, None, "{dtype:?} {isa:?} m={m}: differs from portable");
            }
        }
    }
}

#[test]
fn matmul_rows_do_not_depend_on_batch_size() {
    let mut r = rng(5);
    let (n, k) = (67, 128);
    let matrix = QuantMatrix::new(&random_tensor(&mut r, DType::Q4_1, n, k, 1.0)).unwrap();
    let x = random_vec(&mut r, 19 * k, 1.0);
    let mut batched = vec![f32::NAN; 19 * n];
    matmul(detected_isa(), &x, 19, &matrix, &mut batched);
    // m = 3: one fused group; 11: a group of 8 and one of 3 on AVX-512 (of 4, 4, 3 elsewhere).
    for m in [3, 11] {
        let mut few = vec![f32::NAN; m * n];
        matmul(detected_isa(), &x[..m * k], m, &matrix, &mut few);
        assert!(
            few.iter()
                .zip(&batched)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "rows differ between m={m} (fused path) and m=19 (panel path)"
        );
    }
    for i in 0..19 {
        let mut alone = vec![f32::NAN; n];
        matmul(
            detected_isa(),
            &x[i * k..(i + 1) * k],
            1,
            &matrix,
            &mut alone,
        );
        let same = alone
            .iter()
            .zip(&batched[i * n..(i + 1) * n])
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "row {i} differs between m=1 and m=19");
    }
}

#[test]
fn grouped_matmul_equals_separate_products() {
    let mut r = rng(6);
    let k = 64;
    let a = QuantMatrix::new(&random_tensor(&mut r, DType::Q8_0, 40, k, 1.0)).unwrap();
    let b = QuantMatrix::new(&random_tensor(&mut r, DType::Q5_0, 9, k, 1.0)).unwrap();
    let x = random_vec(&mut r, 3 * k, 1.0);
    let (mut ya, mut yb) = (vec![f32::NAN; 3 * 40], vec![f32::NAN; 3 * 9]);
    matmul_group(
        detected_isa(),
        &x,
        3,
        &mut [
            MatmulJob {
                matrix: &a,
                out: &mut ya,
            },
            MatmulJob {
                matrix: &b,
                out: &mut yb,
            },
        ],
    );
    let (mut sa, mut sb) = (vec![0.0; 3 * 40], vec![0.0; 3 * 9]);
    matmul(Isa::Portable, &x, 3, &a, &mut sa);
    matmul(Isa::Portable, &x, 3, &b, &mut sb);
    assert_eq!(ya, sa);
    assert_eq!(yb, sb);
}

#[test]
fn rms_norm_matches_f64() {
    let mut r = rng(7);
    let n = 77;
    let x = random_vec(&mut r, 3 * n, 2.0);
    let w = random_vec(&mut r, n, 1.0);
    let mut out = vec![f32::NAN; 3 * n];
    rms_norm(detected_isa(), &x, &w, 1e-5, &mut out);
    for row in 0..3 {
        let xr = &x[row * n..(row + 1) * n];
        let inv = 1.0 / (dot_f64(xr, xr) / n as f64 + 1e-5).sqrt();
        for i in 0..n {
            let expected = xr[i] as f64 * inv * w[i] as f64;
            assert!(
                (out[row * n + i] as f64 - expected).abs() < 1e-5,
                "row {row} element {i}"
            );
        }
    }
}

#[test]
fn silu_mul_matches_f64() {
    let mut gate = vec![-20.0f32, -1.5, 0.0, 0.7, 12.0];
    let up = vec![0.5f32, 2.0, 3.0, -1.0, 0.25];
    let expected: Vec<f64> = gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| g as f64 / (1.0 + (-g as f64).exp()) * u as f64)
        .collect();
    silu_mul(&mut gate, &up);
    for (g, e) in gate.iter().zip(expected) {
        assert!((*g as f64 - e).abs() < 1e-6 * e.abs().max(1.0));
    }
}

#[test]
fn gelu_tanh_mul_matches_f64() {
    let mut gate = vec![-20.0f32, -3.0, -0.5, 0.0, 0.7, 2.5, 12.0];
    let up = vec![0.5f32, 2.0, -1.0, 3.0, -1.0, 0.25, 1.5];
    let expected: Vec<f64> = gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| {
            let x = g as f64;
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
            0.5 * x * (1.0 + inner.tanh()) * u as f64
        })
        .collect();
    gelu_tanh_mul(&mut gate, &up);
    for (g, e) in gate.iter().zip(expected) {
        assert!(
            (*g as f64 - e).abs() < 1e-6 * e.abs().max(1.0),
            "{g} vs {e}"
        );
    }
}

#[test]
fn rms_norm_in_place_is_rms_norm_per_row_bitwise() {
    let mut r = rng(17);
    let (d, rows) = (32, 5);
    let x = random_vec(&mut r, rows * d, 2.0);
    let w = random_vec(&mut r, d, 1.0);
    let mut expected = vec![f32::NAN; rows * d];
    rms_norm(detected_isa(), &x, &w, 1e-6, &mut expected);
    let mut got = x.clone();
    rms_norm_in_place(detected_isa(), &mut got, &w, 1e-6);
    assert!(got
        .iter()
        .zip(&expected)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

/// Attending over a window is attending over the rows of that window alone, bit for bit.
#[test]
fn windowed_attention_equals_attention_over_the_window_alone() {
    let mut r = rng(19);
    let (d, len, first) = (64, 40, 13);
    let q = random_vec(&mut r, d, 2.0);
    let k = random_vec(&mut r, d * len, 2.0);
    let v = random_vec(&mut r, d * len, 1.0);
    let rows = Rows { k: &k, v: &v, d };
    let tail = Rows {
        k: &k[first * d..],
        v: &v[first * d..],
        d,
    };
    let window = Window {
        source: &rows,
        first,
    };
    for isa in available_isas() {
        let (mut a, mut b) = (vec![f32::NAN; d], vec![f32::NAN; d]);
        attend(
            isa,
            &q,
            &window,
            len - 1 - first,
            0.2,
            &mut Vec::new(),
            &mut a,
        );
        attend(
            isa,
            &q,
            &tail,
            len - 1 - first,
            0.2,
            &mut Vec::new(),
            &mut b,
        );
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{isa:?}"
        );
    }
}

struct Rows<'a> {
    k: &'a [f32],
    v: &'a [f32],
    d: usize,
}

impl KvSource for Rows<'_> {
    fn key(&self, p: usize) -> &[f32] {
        &self.k[p * self.d..(p + 1) * self.d]
    }
    fn value(&self, p: usize) -> &[f32] {
        &self.v[p * self.d..(p + 1) * self.d]
    }
}

#[test]
fn attention_matches_f64_softmax() {
    let mut r = rng(9);
    let (d, len) = (12, 23);
    let q = random_vec(&mut r, d, 2.0);
    let k = random_vec(&mut r, d * len, 2.0);
    let v = random_vec(&mut r, d * len, 1.0);
    let rows = Rows { k: &k, v: &v, d };
    let scale = 1.0 / (d as f32).sqrt();
    for last in [0, 1, 22] {
        let mut out = vec![f32::NAN; d];
        attend(
            detected_isa(),
            &q,
            &rows,
            last,
            scale,
            &mut Vec::new(),
            &mut out,
        );
        let scores: Vec<f64> = (0..=last)
            .map(|p| dot_f64(&q, rows.key(p)) * scale as f64)
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
        for i in 0..d {
            let e: f64 = (0..=last)
                .map(|p| (scores[p] - max).exp() / sum * rows.value(p)[i] as f64)
                .sum();
            assert!((out[i] as f64 - e).abs() < 1e-5, "last={last} element {i}");
        }
    }
}

/// A group of heads sharing keys and values gives, head by head, the bits of the portable
/// single-head computation, on every ISA (the AVX-512 path has its own dot for 64 and 128).
#[test]
fn grouped_attention_equals_single_heads_on_every_isa() {
    use super::attention::attend_group;
    let mut r = rng(21);
    for (d, group, positions) in [
        (64, 7, 37),
        (128, 2, 16),
        (48, 3, 9),
        (64, 3, 80),
        (128, 6, 33),
    ] {
        let k = random_vec(&mut r, positions * d, 1.0);
        let v = random_vec(&mut r, positions * d, 1.0);
        let rows = Rows { k: &k, v: &v, d };
        let q = random_vec(&mut r, group * d, 1.0);
        let scale = 1.0 / (d as f32).sqrt();
        let last = positions - 1;
        let mut expected = vec![f32::NAN; group * d];
        let mut scores = Vec::new();
        for g in 0..group {
            let head = &q[g * d..(g + 1) * d];
            let out = &mut expected[g * d..(g + 1) * d];
            attend(Isa::Portable, head, &rows, last, scale, &mut scores, out);
        }
        for isa in available_isas() {
            let mut got = vec![f32::NAN; group * d];
            attend_group(
                isa,
                &q,
                group,
                &rows,
                last,
                scale,
                None,
                &mut scores,
                &mut got,
            );
            let diff = got
                .iter()
                .zip(&expected)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert_eq!(diff, None, "d={d} group={group} {isa:?}");
        }
    }
}
