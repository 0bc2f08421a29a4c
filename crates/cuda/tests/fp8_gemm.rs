//! FP8 products on the FP8 tensor cores (crate::fp8_gemm, batch invariance off): the
//! activation quantizer bit for bit against the host's e4m3 encoder
//! (ferrite_model::fp8::f32_to_e4m3), the weights' block-major scales bit for bit, the product
//! against an f64 reference computed from the dequantized FP8 weights and the host-quantized
//! activations, and how far quantizing the activations moves it from the bf16 activations'
//! product; then a whole FP8 model against the CPU backend.

#[allow(dead_code)] // this file uses one of the shared configs
mod arch_configs;
mod common;

use common::compare::{compare_and_report, Run};
use common::quant::{matrix, scales_by_k};
use common::{check, dev, gpu, poisoned, random, read_f32, rel_err, rng, stream, to_bf16};
use ferrite_cuda::buffer::download;
use ferrite_cuda::fp8_gemm::Fp8Gemm;
use ferrite_cuda::gemm::{Gemm, Scratch};
use ferrite_cuda::quant::QuantType;
use ferrite_model::fp8::{e4m3_to_f32, f32_to_e4m3, E4M3_MAX};
use ferrite_model::weights::DType;
use half::bf16;

/// The host's version of fp8_quantize_rows: per token and block of 128, scale = amax / 448,
/// q = e4m3(x * (448 / amax)); the scales block-major ([k / 128, n]).
fn quantize_host(x: &[bf16], n: usize, k: usize) -> (Vec<u8>, Vec<f32>) {
    let blocks = k / 128;
    let mut q = vec![0u8; n * k];
    let mut scales = vec![0f32; blocks * n];
    for t in 0..n {
        for b in 0..blocks {
            let vals = &x[t * k + b * 128..t * k + b * 128 + 128];
            let amax = vals.iter().fold(0f32, |m, v| m.max(v.to_f32().abs()));
            let inv = if amax > 0.0 { E4M3_MAX / amax } else { 0.0 };
            for (j, v) in vals.iter().enumerate() {
                q[t * k + b * 128 + j] = f32_to_e4m3(v.to_f32() * inv);
            }
            scales[b * n + t] = amax / E4M3_MAX;
        }
    }
    (q, scales)
}

#[test]
fn fp8_products_match_the_dequantized_reference() {
    let Some(ctx) = gpu("fp8_gemm") else {
        return;
    };
    let gemm = Gemm::new(stream(&ctx), false).unwrap();
    let path = gemm.fp8_products();
    println!("FP8 products above 8 tokens: {path}");
    assert!(path.starts_with("FP8 tensor cores"), "{path}");
    let workspace = poisoned::<u8>(&ctx, 64 << 20);
    let fp8 = Fp8Gemm::new(stream(&ctx), workspace.ptr(), 64 << 20).unwrap();
    // What cuBLASLt takes (linear_part pads the token count to a multiple of 4).
    let refused: Vec<usize> = (1..=20)
        .filter(|&n| fp8.probe(n, 1024, 1536, 1024).is_err())
        .collect();
    println!("  cuBLASLt 1024x1536 refuses n = {refused:?} of 1..=20");
    // Output rows `ldy` apart: a part of a wider output, or a whole one.
    let mut products = 0;
    for &(rows, k, ldy) in &[
        (96usize, 512usize, 100usize),
        (1024, 1536, 1024),
        (264, 4096, 268),
    ] {
        let (_bufs, m, host) = matrix(&ctx, QuantType::Fp8, rows, k, 7);

        // The loader's kernel puts the scales block-major as the host does.
        let by_k = poisoned::<f32>(&ctx, rows * k / 128);
        let by_row = m.planes[0].unwrap();
        ctx.kernels
            .fp8_scales_by_k(by_row, by_k.ptr(), rows, k / 128)
            .unwrap();
        let mut row_bytes = vec![0u8; rows * k / 128 * 4];
        download(stream(&ctx), by_row, &mut row_bytes).unwrap();
        let mut got = vec![0u8; rows * k / 128 * 4];
        download(stream(&ctx), by_k.ptr(), &mut got).unwrap();
        assert!(
            got == scales_by_k(&row_bytes, rows, k / 128),
            "{rows}x{k}: block-major scales differ"
        );

        for n in [9usize, 37, 300] {
            let mut r = rng(n as u64 + k as u64);
            // Tokens of different sizes, one all-zero block (scale 0).
            let mut x = random(&mut r, n * k, 1.0);
            for (t, row) in x.chunks_mut(k).enumerate() {
                row.iter_mut().for_each(|v| *v *= 1.0 + t as f32 % 7.0);
            }
            x[..128].iter_mut().for_each(|v| *v = 0.0);
            let xb = to_bf16(&x);
            let xd = dev(&ctx, &xb);
            let (want_q, want_scales) = quantize_host(&xb, n, k);

            // The quantizer alone, bit for bit, with 5 padding tokens after the n real ones
            // (zero bytes, scale 0).
            let padded = n + 5;
            let q = poisoned::<u8>(&ctx, padded * k);
            let qs = poisoned::<f32>(&ctx, padded * k / 128);
            ctx.kernels
                .fp8_quantize_rows(xd.ptr(), q.ptr(), qs.ptr(), padded, n, k)
                .unwrap();
            let mut got_q = vec![0u8; padded * k];
            download(stream(&ctx), q.ptr(), &mut got_q).unwrap();
            let bad = got_q.iter().zip(&want_q).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "{rows}x{k} n={n}: {bad} e4m3 activations differ");
            assert!(
                got_q[n * k..].iter().all(|&b| b == 0),
                "padding bytes not zero"
            );
            let got_scales = read_f32(&ctx, &qs, padded * k / 128);
            for b in 0..k / 128 {
                let row = &got_scales[b * padded..(b + 1) * padded];
                let want = &want_scales[b * n..(b + 1) * n];
                let same = row[..n]
                    .iter()
                    .zip(want)
                    .all(|(a, w)| a.to_bits() == w.to_bits());
                assert!(
                    same,
                    "{rows}x{k} n={n}: activation scales of block {b} differ"
                );
                assert!(
                    row[n..].iter().all(|&v| v == 0.0),
                    "padding scales not zero"
                );
            }

            // The product, output rows `ldy` apart.
            let xq: Vec<f64> = (0..n * k)
                .map(|i| {
                    let (t, j) = (i / k, i % k);
                    e4m3_to_f32(want_q[i]) as f64 * want_scales[(j / 128) * n + t] as f64
                })
                .collect();
            let reference = |xs: &dyn Fn(usize) -> f64| -> Vec<f64> {
                let mut out = Vec::with_capacity(n * rows);
                for t in 0..n {
                    for row in 0..rows {
                        let w = &host[row * k..(row + 1) * k];
                        out.push((0..k).map(|j| xs(t * k + j) * w[j] as f64).sum());
                    }
                }
                out
            };
            let want = reference(&|i| xq[i]);
            let unquantized = reference(&|i| xb[i].to_f32() as f64);
            let y = poisoned::<f32>(&ctx, n * ldy);
            let scratch = poisoned::<u8>(&ctx, 64 << 20);
            let s = Scratch {
                ptr: scratch.ptr(),
                bytes: 64 << 20,
            };
            products += 1;
            // Straight through the FP8 path (Gemm::linear would fall back to the slabs).
            let took = fp8
                .linear_part(&ctx.kernels, xd.ptr(), &m, y.ptr(), n, rows, k, ldy, s)
                .unwrap();
            assert!(took, "{rows}x{k} n={n}: cuBLASLt has no algorithm");
            let all = read_f32(&ctx, &y, n * ldy);
            let got: Vec<f32> = (0..n * ldy)
                .filter(|i| i % ldy < rows)
                .map(|i| all[i])
                .collect();
            // Accumulated in f32 by 128-blocks, each scaled in f32 (or written as bf16 and
            // widened: 2^-9).
            check(&format!("FP8 {rows}x{k} n={n}"), &got, &want, 4e-3);
            let moved = rel_err(&got, &unquantized);
            println!("  against the bf16 activations' product: {moved:.2e}");
            assert!(
                moved < 0.06,
                "{rows}x{k} n={n}: quantized activations moved it {moved:.3e}"
            );
        }
    }
    assert!(products >= 3, "only {products} products ran");
}

/// A small model with every matrix FP8, batch invariance off, against the CPU backend on the
/// same bytes: prefill chunks of more than 8 tokens take the FP8 tensor cores (activations
/// quantized), decodes the FP8 GEMVs. Quantized activations move each product by a few percent
/// (the kernel test prints by how much) and the layers compound it, so the bound, 0.15, only
/// catches a broken path (a wrong scale or layout moves logits by O(1)); greedy flips are
/// reported, not failed: the CPU multiplies unquantized activations, which is not the oracle
/// for this path (the kernel test above is).
#[test]
fn an_fp8_model_with_fp8_products_stays_near_the_cpu() {
    let config = ferrite_model::config::ModelConfig {
        intermediate_size: 1536,
        ..arch_configs::llama_small()
    };
    let weights = ferrite_model::dummy::quantized::quantize_matrices(
        &ferrite_model::dummy::generate(&config, 5),
        &|_| Some(DType::Fp8),
        0.02,
        17,
    );
    let run = Run {
        max_rel_err: 0.15,
        page_size: 16,
        eager: false,
        lens: &[70, 100, 85, 9],
        decodes: 20,
        outliers: 0,
        batch_invariant: false,
    };
    let failures = compare_and_report(&config, &run, Some(weights));
    for f in &failures {
        println!("  {f}");
    }
    let errors: Vec<_> = failures
        .iter()
        .filter(|f| f.contains("relative error"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
