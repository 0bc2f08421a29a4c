//! The quantized-weight kernels against the host dequantizer (ferrite_model::dequant, exact
//! against the GGUF reference): dequantization to bf16 and the embedding lookup bit for bit,
//! the GEMVs (1..8 tokens, both splits) to f32 rounding, and the Gemm's products of more tokens
//! (bf16-rounded weights: the ordered kernels, FP8's own), every device format.

mod common;

use common::quant::matrix;
use common::{check, dev, gpu, poisoned, random, read_bf16, read_f32, rng, stream, to_bf16};
use ferrite_cuda::gemm::{Gemm, Scratch};
use ferrite_cuda::launchers::{Lookup, QuantGemvArgs};
use ferrite_cuda::linear::Linear;
use ferrite_cuda::quant::QuantType;
use half::bf16;

#[test]
fn quantized_kernels_match_the_host_dequantizer() {
    let Some(ctx) = gpu("quant_kernels") else {
        return;
    };
    let gemm = Gemm::new(stream(&ctx), true).unwrap();
    // The default Gemm: 2..64 tokens through quant_gemv_ordered.cu (FP8 through its own
    // kernels), beyond them the slabs.
    let fast = Gemm::new(stream(&ctx), false).unwrap();
    for q in QuantType::ALL {
        // 17,408: past 16,384, the tensor-core GEMV's old staging limit (the 27B's down products).
        for &(rows, k) in &[(96usize, 512usize), (40, 4608), (40, 17_408)] {
            let (_bufs, m, host) = matrix(&ctx, q, rows, k, 3);
            // Dequantization: rows 8.. of the matrix, bit for bit in bf16.
            let out = poisoned::<bf16>(&ctx, (rows - 8) * k);
            ctx.kernels
                .qdequant(q, m.planes, out.ptr(), 8, rows - 8, k)
                .unwrap();
            let got = read_bf16(&ctx, &out, (rows - 8) * k);
            let want: Vec<f32> = host[8 * k..]
                .iter()
                .map(|&v| bf16::from_f32(v).to_f32())
                .collect();
            let bad = got
                .iter()
                .zip(&want)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(bad, 0, "{q:?} {rows}x{k}: {bad} dequantized values differ");

            // Embedding lookup of rows 5, 0 and 37 (scaled by 2): exact in f32.
            let tokens = dev(&ctx, &[5i32, 0, 37]);
            let x = poisoned::<f32>(&ctx, 3 * k);
            ctx.kernels
                .qembed(
                    q,
                    m.planes,
                    &Lookup {
                        tokens: tokens.ptr(),
                        x: x.ptr(),
                        hidden: k,
                        scale: 2.0,
                        n: 3,
                    },
                )
                .unwrap();
            let got = read_f32(&ctx, &x, 3 * k);
            for (i, &row) in [5usize, 0, 37].iter().enumerate() {
                let want = host[row * k..(row + 1) * k].iter().map(|v| v * 2.0);
                let same = got[i * k..(i + 1) * k]
                    .iter()
                    .zip(want)
                    .all(|(a, b)| *a == b);
                assert!(same, "{q:?}: embedding row {row} differs");
            }

            // Products: GEMV for 1..=8 tokens, the Gemm for 24 and 40 (both Gemms: the ordered
            // kernels' wide variants); y rows 3 apart from the part's width (a part of a wider
            // output).
            for n in [1usize, 2, 3, 5, 8, 24, 40] {
                let mut r = rng(n as u64);
                let x = random(&mut r, n * k, 1.0);
                let xb = to_bf16(&x);
                let xd = dev(&ctx, &xb);
                let ldy = rows + 3;
                let want: Vec<f64> = (0..n * ldy)
                    .map(|i| {
                        let (t, row) = (i / ldy, i % ldy);
                        if row >= rows {
                            return f64::NAN;
                        }
                        (0..k)
                            .map(|j| xb[t * k + j].to_f32() as f64 * host[row * k + j] as f64)
                            .sum()
                    })
                    .collect();
                let y = poisoned::<f32>(&ctx, n * ldy);
                let keep: Vec<usize> = (0..n * ldy).filter(|i| i % ldy < rows).collect();
                let want_kept: Vec<f64> = keep.iter().map(|&i| want[i]).collect();
                if n <= 8 {
                    ctx.kernels
                        .qgemv(&QuantGemvArgs {
                            format: q,
                            planes: m.planes,
                            x: xd.ptr(),
                            y: y.ptr(),
                            n,
                            rows,
                            k,
                            ldy,
                        })
                        .unwrap();
                } else {
                    // A scratch of 7 rows: several slabs.
                    let scratch = poisoned::<bf16>(&ctx, 7 * k);
                    let lin = Linear::single(m, rows, k);
                    let lin = Linear { rows: ldy, ..lin };
                    let s = Scratch {
                        ptr: scratch.ptr(),
                        bytes: 7 * k * 2,
                    };
                    gemm.linear(&ctx.kernels, xd.ptr(), &lin, y.ptr(), n, s)
                        .unwrap();
                    // (FP8's default product quantizes the activations too: its own test.)
                    if q != QuantType::Fp8 {
                        let y2 = poisoned::<f32>(&ctx, n * ldy);
                        fast.linear(&ctx.kernels, xd.ptr(), &lin, y2.ptr(), n, s)
                            .unwrap();
                        let got = read_f32(&ctx, &y2, n * ldy);
                        let got: Vec<f32> = keep.iter().map(|&i| got[i]).collect();
                        let what = format!("{q:?} {rows}x{k} n={n} default");
                        check(&what, &got, &want_kept, 1e-2);
                    }
                }
                let got = read_f32(&ctx, &y, n * ldy);
                let got: Vec<f32> = keep.iter().map(|&i| got[i]).collect();
                let want = want_kept;
                // The slab path multiplies bf16-rounded weights.
                let tol = if n <= 8 { 1e-5 } else { 1e-2 };
                check(&format!("{q:?} {rows}x{k} n={n}"), &got, &want, tol);
            }
        }
        println!("{q:?}: dequant, embedding, GEMV 1..8 and slab GEMM agree");
    }
}
