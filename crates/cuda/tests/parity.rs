//! CPU and CUDA backends on the same dummy weights: logits agree to bf16 tolerance and greedy
//! tokens match (except near-ties) over batches that mix prefill chunks and decodes, for page
//! sizes 1 and 16, with CUDA graphs on and off: llama and qwen2 shapes, then one random-weight
//! model per architecture of issue 12 (arch_configs: Llama 3 rope scaling, qwen2, qwen3's Q/K
//! norm, mistral's and gemma3's sliding windows, gemma3's whole block), with prompts longer
//! than the window.

mod arch_configs;
mod common;

use arch_configs::llama_small;
use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, CudaOptions, WeightSource};
use ferrite_engine::{Backend, LogitsRequest, SeqBatch};
use ferrite_model::config::ModelConfig;
use ferrite_model::dummy::{generate, preset};
use ferrite_model::weights::{DType, ModelWeights};

struct Seq {
    tokens: Vec<u32>,
    /// Prompt length plus decode steps.
    final_len: usize,
    computed: usize,
    table: Vec<u32>,
}

impl Seq {
    fn done(&self) -> bool {
        self.tokens.len() >= self.final_len && self.computed == self.tokens.len()
    }
}

/// What one CPU/CUDA comparison runs: prompts of `lens` tokens, fed in chunks of at most 48
/// tokens beside the other sequences' decodes, then `decodes` greedy steps each.
struct Run {
    /// Largest logits relative error allowed at any step (2e-2: bf16 activations on CUDA, f32
    /// on the CPU).
    max_rel_err: f64,
    page_size: usize,
    eager: bool,
    lens: &'static [usize],
    decodes: usize,
}

fn run_pair(config: &ModelConfig, page_size: usize, eager: bool) {
    let run = Run {
        page_size,
        eager,
        lens: &[70, 33, 5, 150],
        decodes: 16,
        max_rel_err: 2e-2,
    };
    compare_backends(config, &run);
}

fn compare_backends(config: &ModelConfig, run: &Run) {
    compare_backends_on(config, run, None);
}

/// As [`compare_backends`], on `host` weights when given (else the dummy weights).
fn compare_backends_on(config: &ModelConfig, run: &Run, host: Option<ModelWeights>) {
    let failures = compare_and_report(config, run, host);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs the comparison to the end, printing the worst errors of steps with more tokens than
/// the GEMVs take (prefill chunks: the dequantize + cuBLAS path on quantized weights) and of
/// the others apart; returns what broke the tolerances.
fn compare_and_report(config: &ModelConfig, run: &Run, host: Option<ModelWeights>) -> Vec<String> {
    let mut failures = Vec::new();
    let Run {
        page_size, eager, ..
    } = *run;
    let Some(_) = common::gpu("parity") else {
        return failures;
    };
    let seed = 5;
    let cpu_weights = host.clone().unwrap_or_else(|| generate(config, seed));
    let mut cpu = CpuBackend::new(config.clone(), cpu_weights, 2).unwrap();
    let options = CudaOptions {
        device: 0,
        max_num_seqs: 8,
        max_num_batched_tokens: 512,
        enforce_eager: eager,
        cuda_graph_max_bs: 8,
        gpu_memory_utilization: 0.9,
        batch_invariant: true,
    };
    let source = host.map_or(WeightSource::Dummy { seed }, WeightSource::Host);
    let mut gpu = CudaBackend::new(config.clone(), source, options).unwrap();
    let num_pages = 4096 / page_size;
    cpu.init_kv_cache(num_pages, page_size).unwrap();
    gpu.init_kv_cache(num_pages, page_size).unwrap();

    let prompt = |len: usize, salt: u32| {
        (0..len as u32)
            .map(|i| (i * 31 + salt * 7) % config.vocab_size as u32)
            .collect::<Vec<_>>()
    };
    let mut next_page = 0u32;
    let mut seqs: Vec<Seq> = run
        .lens
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let pages = (len + run.decodes + 24).div_ceil(page_size);
            let table = (next_page..next_page + pages as u32).rev().collect();
            next_page += pages as u32;
            Seq {
                tokens: prompt(len, i as u32),
                final_len: len + run.decodes,
                computed: 0,
                table,
            }
        })
        .collect();
    let (mut worst, mut mismatches, mut steps) = (0.0f64, 0, 0);
    let (mut worst_wide, mut worst_narrow) = (0.0f64, 0.0f64);
    // Prompts in chunks of at most 48 tokens, decodes sharing the steps.
    while !seqs.iter().all(Seq::done) {
        let mut batch = Vec::new();
        let mut who = Vec::new();
        for (i, s) in seqs.iter().enumerate() {
            if s.done() {
                continue;
            }
            let len = (s.tokens.len() - s.computed).min(48);
            let end = s.computed + len;
            batch.push(SeqBatch {
                tokens: &s.tokens[s.computed..end],
                start_pos: s.computed,
                block_table: &s.table,
                logits: if end == s.tokens.len() {
                    LogitsRequest::Last
                } else {
                    LogitsRequest::None
                },
            });
            who.push((i, end));
        }
        if batch.is_empty() {
            break;
        }
        let wide = batch.iter().map(|s| s.tokens.len()).sum::<usize>() > 8;
        let a = cpu.forward(&batch).unwrap();
        let b = gpu.forward(&batch).unwrap();
        let lasts: Vec<bool> = batch
            .iter()
            .map(|s| s.logits == LogitsRequest::Last)
            .collect();
        drop(batch);
        assert_eq!(a.logits.len(), b.logits.len());
        let mut row = 0;
        let mut appended = Vec::new();
        for (k, &(i, end)) in who.iter().enumerate() {
            if !lasts[k] {
                seqs[i].computed = end;
                continue;
            }
            let (ra, rb) = (a.row(row), b.row(row));
            row += 1;
            let want: Vec<f64> = ra.iter().map(|&v| v as f64).collect();
            let e = common::rel_err(rb, &want);
            worst = worst.max(e);
            if wide {
                worst_wide = worst_wide.max(e);
            } else {
                worst_narrow = worst_narrow.max(e);
            }
            if e > run.max_rel_err {
                failures.push(format!(
                    "{:?} step {steps} seq {i} (position {}): logits relative error {e:.3e} > {:.1e}",
                    config.arch,
                    end - 1,
                    run.max_rel_err
                ));
            }
            let ta = ferrite_engine::sampler::argmax(ra);
            let tb = ferrite_engine::sampler::argmax(rb);
            if ta != tb {
                // Allowed only when the CPU's top two are within the tolerance of each other.
                let gap = (ra[ta as usize] - ra[tb as usize]).abs();
                if gap >= 0.05 {
                    failures.push(format!(
                        "{:?} step {steps} seq {i} (position {}): greedy CPU {ta} vs CUDA {tb}, \
                         CPU logit gap {gap} >= 0.05",
                        config.arch,
                        end - 1
                    ));
                }
                mismatches += 1;
            }
            seqs[i].computed = end;
            appended.push((i, ta));
        }
        for (i, t) in appended {
            if seqs[i].tokens.len() < seqs[i].final_len {
                seqs[i].tokens.push(t);
            }
        }
        steps += 1;
    }
    println!(
        "parity {:?} hd={} page={page_size} eager={eager} graphs={:?}: {steps} steps, worst logits rel err {worst:.2e}, {mismatches} near-tie greedy mismatches",
        config.arch, config.head_dim, gpu.graph_sizes()
    );
    println!("  worst of steps over 8 tokens {worst_wide:.2e}, of the others {worst_narrow:.2e}");
    failures
}

/// The issue-12 architectures: prompts of 70 to 100 tokens (beyond the window of 32), chunked
/// by 48 so later chunks start past the window, then 20 greedy decode steps.
fn arch_run(page_size: usize, eager: bool) -> Run {
    Run {
        page_size,
        eager,
        lens: &[70, 100, 85, 9],
        decodes: 20,
        max_rel_err: 2e-2,
    }
}

/// Gemma 3's whole block on random weights: its post-attention and post-MLP norms scale each
/// block's bf16-rounded output back to unit size before it joins the residual, so the
/// rounding of every layer enters at full weight. Each of its switches alone stays within
/// 2e-2 on the qwen3 block (`gemma3_switches_one_at_a_time`; post norms alone 9.3e-3 on the
/// H200, 2026-12-03); all of them together reach 2.07e-2 at the first decode and 2.51e-2 at
/// the ninth of 23 steps, with no greedy mismatch beyond the near-tie rule; the
/// transformers-made gemma3 checkpoint stays at 1.48e-2 with every token equal to
/// transformers' (tests/fixture_parity.rs). The greedy rule below is the same as for every
/// other architecture.
fn gemma3_run(page_size: usize, eager: bool) -> Run {
    Run {
        max_rel_err: 3e-2,
        ..arch_run(page_size, eager)
    }
}

#[test]
fn arch_llama3_rope_scaling_page16_graphs() {
    compare_backends(&arch_configs::llama3(), &arch_run(16, false));
}

#[test]
fn arch_qwen2_page16_graphs() {
    compare_backends(&arch_configs::qwen2(), &arch_run(16, false));
}

#[test]
fn arch_qwen3_qk_norm_page16_graphs() {
    compare_backends(&arch_configs::qwen3(), &arch_run(16, false));
}

#[test]
fn arch_mistral_sliding_window_page16_graphs() {
    compare_backends(&arch_configs::mistral(), &arch_run(16, false));
}

#[test]
fn arch_mistral_sliding_window_page1_eager() {
    compare_backends(&arch_configs::mistral(), &arch_run(1, true));
}

#[test]
fn arch_gemma3_page16_graphs() {
    compare_backends(&arch_configs::gemma3(), &gemma3_run(16, false));
}

#[test]
fn arch_gemma3_page16_eager() {
    compare_backends(&arch_configs::gemma3(), &gemma3_run(16, true));
}

#[test]
fn arch_gemma3_head_dim_256_page16_graphs() {
    compare_backends(&arch_configs::gemma3_hd256(), &gemma3_run(16, false));
}

/// Each of gemma3's switches alone on the qwen3 block.
#[test]
fn gemma3_switches_one_at_a_time() {
    for switch in [
        "norm_offset",
        "post_norms",
        "gelu_tanh",
        "embedding_scale",
        "attn_scale",
        "window",
    ] {
        println!("switch {switch}:");
        compare_backends(&arch_configs::qwen3_with(switch), &arch_run(16, false));
    }
}

#[test]
fn qwen_tiny_page16_graphs() {
    run_pair(&preset("tiny").unwrap(), 16, false);
}

#[test]
fn qwen_tiny_page1_eager() {
    run_pair(&preset("tiny").unwrap(), 1, true);
}

#[test]
fn llama_small_page16_eager() {
    run_pair(&llama_small(), 16, true);
}

#[test]
fn llama_small_page1_graphs() {
    run_pair(&llama_small(), 1, false);
}

/// A llama-shaped model whose sizes are whole K-quant blocks (hidden 512, intermediate 1536).
fn quant_config() -> ModelConfig {
    ModelConfig {
        intermediate_size: 1536,
        ..llama_small()
    }
}

/// The dummy weights with every matrix replaced by random blocks of `pick(name)`.
///
/// Block scales of 0.02 keep the random model from amplifying rounding: at 0.05, Q8_0 and
/// Q5_0 weights made models whose logits moved by 2e-2 from the bf16 rounding of activations
/// alone (H200, 2026-12-04: all-Q8_0 at 2.13e-2 through the quantized kernels and 2.76e-2 with
/// the same weights widened to bf16 at load; Q4_0 at 7.7e-4, Q4_K at 1.7e-4), which hides
/// rather than shows a kernel's mistakes.
fn quantized(config: &ModelConfig, pick: &dyn Fn(&str) -> Option<DType>) -> ModelWeights {
    quantized_at(config, pick, 0.02)
}

fn quantized_at(
    config: &ModelConfig,
    pick: &dyn Fn(&str) -> Option<DType>,
    scale: f32,
) -> ModelWeights {
    ferrite_model::dummy::quantized::quantize_matrices(&generate(config, 5), pick, scale, 17)
}

/// Every device quantized format alone: prefill chunks (dequantize + cuBLAS) and decodes (the
/// quantized GEMVs) against the CPU backend on the same file bytes.
#[test]
fn quantized_weights_each_type_match_the_cpu() {
    let config = quant_config();
    let mut failures = Vec::new();
    for dtype in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Fp8,
    ] {
        println!("all matrices {dtype:?}:");
        let weights = quantized(&config, &|_| Some(dtype));
        let broke = compare_and_report(&config, &arch_run(16, false), Some(weights.clone()));
        if !broke.is_empty() {
            // The same weights widened to bf16 at load (every product through cuBLAS or the
            // bf16 GEMV): how much of the error the model's own rounding explains.
            println!("  {dtype:?} widened to bf16 at load, for comparison:");
            // SAFETY: the test binary runs its tests one at a time (--test-threads=1 on the
            // device) and nothing else reads the environment meanwhile.
            unsafe { std::env::set_var("FERRITE_CUDA_WIDEN_QUANT", "1") };
            compare_and_report(&config, &arch_run(16, false), Some(weights));
            unsafe { std::env::remove_var("FERRITE_CUDA_WIDEN_QUANT") };
        }
        failures.extend(broke.into_iter().map(|f| format!("{dtype:?}: {f}")));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A Q4_K_M-like mix inside each layer: Q/K/V and gate/up fused from tensors of different
/// formats (one part each), a Q6_K embedding table and a Q8_0 output projection; eager and
/// with graphs.
#[test]
fn quantized_weights_mixed_types_match_the_cpu() {
    let config = quant_config();
    let pick = |name: &str| {
        Some(match name.rsplit_once('.').map_or(name, |(n, _)| n) {
            n if n.ends_with("attn_q") => DType::Q4_K,
            n if n.ends_with("attn_k") => DType::Q5_0,
            n if n.ends_with("attn_v") => DType::Q6_K,
            n if n.ends_with("attn_output") => DType::Q4_0,
            n if n.ends_with("ffn_gate") => DType::Q4_1,
            n if n.ends_with("ffn_up") => DType::Q8_0,
            n if n.ends_with("ffn_down") => DType::Q5_K,
            "token_embd" => DType::Q6_K,
            "output" => DType::Q8_0,
            _ => return None,
        })
    };
    // The mix at 0.02 still amplified rounding on one prompt (H200, 2026-12-04: 4.27e-2 on
    // one sequence of four through the quantized kernels, 5.23e-2 and a greedy flip with the
    // same weights widened to bf16 at load), hence 0.01.
    let quantized = |config: &ModelConfig, pick: &dyn Fn(&str) -> Option<DType>| {
        quantized_at(config, pick, 0.01)
    };
    for eager in [false, true] {
        let weights = quantized(&config, &pick);
        compare_backends_on(&config, &arch_run(16, eager), Some(weights));
    }
    // A tied embedding: the LM head is the quantized table itself.
    let tied = ModelConfig {
        tie_word_embeddings: true,
        ..config.clone()
    };
    let weights = quantized(&tied, &pick);
    compare_backends_on(&tied, &arch_run(16, false), Some(weights));
}
