//! Batch invariance on the GPU (opt-in, `CudaOptions::batch_invariant`, `--batch-invariant`): a token's result
//! is the same bit for bit whatever shares its launch.
//!
//! - The bf16 products (gemv_mma.cu up to 64 tokens, tile_mma.cu beyond): each token's row of a
//!   product of n tokens equals the row of the same token computed alone, for n from 1 to 300,
//!   and the tile kernel forced onto 1..8 tokens equals the skinny one; both within f32
//!   rounding of an f64 reference.
//! - The quantized matrices, every device format: 1..64 tokens (quant_gemv_ordered.cu, its
//!   wide kernels past 8) and more (dequantized slabs, then the bf16 products) bit-identical
//!   row for row.
//! - Whole models on dummy weights: a sequence's logits, prompt whole and alone then decoded
//!   alone, equal bit for bit its logits with the prompt in chunks beside other sequences'
//!   chunks and decodes (graphs on, so decodes alone replay a one-sequence graph and batched
//!   ones run eagerly beside prefill chunks): a llama shape, SmolLM2's (k = 576, not a multiple
//!   of 128) and mistral's and gemma3's sliding windows.
//!
//! The oracle is a property (equality across batchings), plus the f64 reference for the
//! products' values; the CPU parity suite (parity.rs) checks the models' values.

#[allow(dead_code)]
mod arch_configs;
mod common;

use arch_configs::llama_small;
use common::*;
use ferrite_cuda::gemm::{Gemm, Scratch};
use ferrite_cuda::launchers::LinearArgs;
use ferrite_cuda::linear::Linear;
use ferrite_cuda::quant::QuantType;
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{Backend, LogitsRequest, SeqBatch};
use ferrite_model::config::{BlockVariant, ModelConfig};

#[test]
fn tensor_core_products_do_not_depend_on_the_token_count() {
    let Some(ctx) = gpu("batch-invariant products") else {
        return;
    };
    let gemm = Gemm::new(stream(&ctx), true).unwrap();
    let mut r = rng(17);
    const MOST: usize = 300;
    // (rows, k): a ragged row count, SmolLM2's k (576 = 4.5 blocks of 128), long rows split
    // over several warps, a 1.5B down projection's k.
    for (rows, k) in [
        (1003usize, 1536usize),
        (301, 576),
        (97, 8960),
        (256, 4096),
        (130, 32),
    ] {
        let w = bf16_round(&random(&mut r, rows * k, 0.05));
        let x = bf16_round(&random(&mut r, MOST * k, 1.0));
        let (wd, xd) = (dev(&ctx, &to_bf16(&w)), dev(&ctx, &to_bf16(&x)));
        let product = |n: usize, x: &ferrite_cuda::buffer::DeviceBuffer, tile: bool| {
            let y = poisoned::<f32>(&ctx, n * rows);
            let args = LinearArgs {
                x: x.ptr(),
                w: wd.ptr(),
                y: y.ptr(),
                n,
                rows,
                k,
                ldy: rows,
            };
            if tile {
                ctx.kernels.tile_product(&args).unwrap();
            } else {
                gemm.bf16_product(&ctx.kernels, &args).unwrap();
            }
            read_f32(&ctx, &y, n * rows)
        };
        let all = product(MOST, &xd, false);
        let want = reference(&x, &w, MOST, rows, k);
        check(&format!("invariant {rows}x{k} n={MOST}"), &all, &want, 1e-5);
        // Each token alone (a sample of them) against its row of the whole product.
        for t in [0usize, 1, 7, 8, 63, 64, 65, 127, 128, 200, MOST - 1] {
            let alone = dev(&ctx, &to_bf16(&x[t * k..(t + 1) * k]));
            let got = product(1, &alone, false);
            let row = &all[t * rows..(t + 1) * rows];
            assert_bits_eq(
                &got,
                row,
                &format!("{rows}x{k}: token {t} alone vs in {MOST}"),
            );
        }
        // Every prefix count that changes the kernel or its tiling.
        for n in [2usize, 3, 8, 9, 16, 17, 33, 64, 65, 128, 129, 257] {
            let got = product(n, &xd, false);
            assert_bits_eq(
                &got,
                &all[..n * rows],
                &format!("{rows}x{k}: n={n} vs {MOST}"),
            );
        }
        for n in 1..=8 {
            let got = product(n, &xd, true);
            assert_bits_eq(&got, &all[..n * rows], &format!("{rows}x{k}: tile n={n}"));
        }
        println!("{rows}x{k}: every batching bit-identical");
    }
}

#[test]
fn quantized_products_do_not_depend_on_the_token_count() {
    let Some(ctx) = gpu("batch-invariant quantized products") else {
        return;
    };
    let gemm = Gemm::new(stream(&ctx), true).unwrap();
    for q in QuantType::ALL {
        // k = 576 (a ragged last 128-block) where the format's blocks allow it.
        let ks: &[usize] = if q.dtype().block_len() == 32 {
            &[576, 1536]
        } else {
            &[1536, 4608]
        };
        for &k in ks {
            let rows = 200;
            let (_bufs, m, host) = common::quant::matrix(&ctx, q, rows, k, 9);
            const MOST: usize = 100;
            let x = bf16_round(&random(&mut rng(k as u64), MOST * k, 1.0));
            let xd = dev(&ctx, &to_bf16(&x));
            // A scratch of 70 rows: the slab path cuts the matrix in three.
            let scratch = poisoned::<half::bf16>(&ctx, 70 * k);
            let s = Scratch {
                ptr: scratch.ptr(),
                bytes: 70 * k * 2,
            };
            let lin = Linear::single(m, rows, k);
            let product = |n: usize| {
                let y = poisoned::<f32>(&ctx, n * rows);
                gemm.linear(&ctx.kernels, xd.ptr(), &lin, y.ptr(), n, s)
                    .unwrap();
                read_f32(&ctx, &y, n * rows)
            };
            let all = product(MOST);
            // The dequantizer's bf16 values are what both paths multiply.
            let wb = bf16_round(&host);
            let want = reference(&x, &wb, MOST, rows, k);
            check(&format!("{q:?} 200x{k} n={MOST}"), &all, &want, 1e-5);
            for n in [1usize, 2, 5, 8, 9, 24, 64, 65] {
                let got = product(n);
                assert_bits_eq(
                    &got,
                    &all[..n * rows],
                    &format!("{q:?} 200x{k}: n={n} vs {MOST}"),
                );
            }
        }
        println!("{q:?}: every batching bit-identical");
    }
}

/// y[t, r] = sum_j x[t, j] w[r, j] in f64, for n tokens and `rows` rows of k.
fn reference(x: &[f32], w: &[f32], n: usize, rows: usize, k: usize) -> Vec<f64> {
    (0..n * rows)
        .map(|i| {
            let (t, row) = (i / rows, i % rows);
            (0..k)
                .map(|j| x[t * k + j] as f64 * w[row * k + j] as f64)
                .sum()
        })
        .collect()
}

fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!("{what}: element {i} differs: {} vs {}", got[i], want[i]);
    }
}

/// SmolLM2-135M's widths (hidden 576, 9 heads of 64, 3 KV heads, 1536 intermediate), fewer
/// layers and a smaller vocabulary.
fn smollm2_shape() -> ModelConfig {
    ModelConfig {
        hidden_size: 576,
        intermediate_size: 1536,
        num_heads: 9,
        num_kv_heads: 3,
        head_dim: 64,
        rope_theta: 100_000.0,
        tie_word_embeddings: true,
        block: BlockVariant::llama(64),
        ..llama_small()
    }
}

/// A sequence's logits rows, one per step that produced one: after its prompt, then after
/// each decode token.
type Rows = Vec<Vec<f32>>;

struct Plan<'a> {
    prompt: &'a [u32],
    /// Tokens fed after the prompt, one per decode step.
    decodes: &'a [u32],
    /// Prompt chunk size.
    chunk: usize,
    table: Vec<u32>,
}

/// Runs sequence 0 of `plans` (with the others beside it, each on its own pages) to the end
/// of its decodes; returns sequence 0's logits rows.
fn run(gpu: &mut CudaBackend, plans: &[Plan<'_>]) -> Rows {
    let mut done = vec![0usize; plans.len()];
    let mut rows = Rows::new();
    while done[0] < plans[0].prompt.len() + plans[0].decodes.len() {
        let mut batch = Vec::new();
        let mut who = Vec::new();
        let streams: Vec<Vec<u32>> = plans
            .iter()
            .map(|p| p.prompt.iter().chain(p.decodes).copied().collect())
            .collect();
        for (i, p) in plans.iter().enumerate() {
            let total = p.prompt.len() + p.decodes.len();
            if done[i] >= total {
                continue;
            }
            let end = if done[i] < p.prompt.len() {
                (done[i] + p.chunk).min(p.prompt.len())
            } else {
                done[i] + 1
            };
            let last = end >= p.prompt.len();
            batch.push(SeqBatch {
                tokens: &streams[i][done[i]..end],
                start_pos: done[i],
                block_table: &p.table,
                window_table: &[],
                state_slot: None,
                state_copy: Default::default(),
                logits: if last {
                    LogitsRequest::Last
                } else {
                    LogitsRequest::None
                },
            });
            who.push((i, end, last));
        }
        let out = gpu.forward(&batch).unwrap();
        let mut row = 0;
        for &(i, end, last) in &who {
            if last {
                if i == 0 {
                    rows.push(out.row(row).to_vec());
                }
                row += 1;
            }
            done[i] = end;
        }
    }
    rows
}

fn same_logits_alone_batched_and_chunked(config: &ModelConfig, name: &str) {
    let Some(_) = gpu(name) else { return };
    let page_size = 16;
    let options = common::fixtures::test_options(false, true);
    let mut gpu =
        CudaBackend::new(config.clone(), WeightSource::Dummy { seed: 3 }, options).unwrap();
    gpu.init_kv_cache(1024, page_size).unwrap();
    let vocab = config.vocab_size as u32;
    let tokens = |len: usize, salt: u32| -> Vec<u32> {
        (0..len as u32)
            .map(|i| (i * 37 + salt * 11 + 5) % vocab)
            .collect()
    };
    let (prompt, decodes) = (tokens(150, 0), tokens(24, 9));
    let pages = |first: u32| -> Vec<u32> { (first..first + 24).collect() };
    // Alone: the whole prompt in one chunk, then decodes alone (the one-sequence graph).
    let alone = run(
        &mut gpu,
        &[Plan {
            prompt: &prompt,
            decodes: &decodes,
            chunk: 512,
            table: pages(0),
        }],
    );
    // Batched and chunked, on other pages: the prompt in chunks of 40 beside three other
    // sequences' chunks and decodes, in different positions of the batch.
    let others: Vec<(Vec<u32>, Vec<u32>)> = [(90usize, 30usize), (7, 40), (300, 10)]
        .iter()
        .enumerate()
        .map(|(i, &(p, d))| (tokens(p, 20 + i as u32), tokens(d, 30 + i as u32)))
        .collect();
    for (round, chunk) in [(0u32, 40usize), (1, 64), (2, 9)] {
        let mut plans = vec![Plan {
            prompt: &prompt,
            decodes: &decodes,
            chunk,
            table: pages(100 + 150 * round),
        }];
        for (j, (p, d)) in others.iter().enumerate() {
            plans.push(Plan {
                prompt: p,
                decodes: d,
                chunk: 48,
                table: pages(125 + 150 * round + 25 * j as u32),
            });
        }
        let batched = run(&mut gpu, &plans);
        assert_eq!(alone.len(), batched.len());
        for (step, (a, b)) in alone.iter().zip(&batched).enumerate() {
            assert_bits_eq(
                b,
                a,
                &format!("{name}: chunks of {chunk}, batched: step {step}"),
            );
        }
    }
    println!(
        "{name}: {} logits rows bit-identical alone, batched and chunked (40, 64, 9)",
        alone.len()
    );
}

#[test]
fn a_sequence_gives_the_same_logits_alone_batched_and_chunked() {
    same_logits_alone_batched_and_chunked(&llama_small(), "llama");
    same_logits_alone_batched_and_chunked(&smollm2_shape(), "smollm2 shape");
    same_logits_alone_batched_and_chunked(&arch_configs::mistral(), "mistral (window 32)");
    same_logits_alone_batched_and_chunked(&arch_configs::gemma3(), "gemma3 (windows, hd 64)");
    same_logits_alone_batched_and_chunked(&arch_configs::qwen3_moe(), "qwen3_moe (16 experts)");
}
