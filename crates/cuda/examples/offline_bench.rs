//! Offline throughput driver for the GPU script (bench/gpu/run.sh): N requests of random token
//! ids (input length, output length, ignore_eos) through the real engine core in-process, on
//! the CUDA backend with dummy weights. Prints one `RESULT` line per measurement.
//!
//! usage: offline_bench PRESET NUM_REQUESTS INPUT_LEN OUTPUT_LEN [eager]
//! environment: FERRITE_BENCH_QUANT=q4_k_m|TYPE (random GGUF-quantized weights),
//! FERRITE_BENCH_SPEC=self|other|ngram|suffix|mtp|eagle3 and FERRITE_BENCH_SPEC_K=N
//! (speculative decoding with a controlled acceptance rate; mtp: the model's own MTP layer,
//! eagle3: a random EAGLE-3 head of the model's shape (ferrite_model::dummy::dummy_eagle3),
//! random like the rest, so their acceptance says nothing: the drafting and verifying cost
//! per step is reported).
//! One request also reports its warm prefill.

use std::sync::Arc;
use std::time::Instant;

use ferrite_cuda::{CudaBackend, CudaOptions, WeightSource};
use ferrite_engine::{
    build_engine_core, DraftModel, EngineConfig, EngineStats, GenerationRequest, HeadProposer,
    NgramProposer, Proposer, SamplingParams, SpecOptions, SuffixProposer,
};

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 5,
        "usage: offline_bench PRESET NUM_REQUESTS INPUT_LEN OUTPUT_LEN [eager]"
    );
    let preset = &args[1];
    let (n, input_len, output_len): (usize, usize, usize) =
        (args[2].parse()?, args[3].parse()?, args[4].parse()?);
    let eager = args.get(5).is_some_and(|a| a == "eager");
    let started = Instant::now();
    let config = ferrite_model::dummy::config_for(preset)?;
    let max_num_seqs = n.clamp(1, 256);
    let options = CudaOptions {
        device: 0,
        max_num_seqs,
        max_num_batched_tokens: 8192.max(input_len),
        enforce_eager: eager,
        cuda_graph_max_bs: 512,
        gpu_memory_utilization: 0.9,
        // FERRITE_BENCH_BATCH_INVARIANT=1: the batch-invariant kernels (`--batch-invariant`).
        batch_invariant: std::env::var("FERRITE_BENCH_BATCH_INVARIANT").is_ok_and(|v| v == "1"),
    };
    // FERRITE_BENCH_QUANT=q4_k_m (or one type: q8_0, q6_k, ...): random GGUF-quantized
    // weights of the preset's shapes, loaded from the host as a quantized file would be.
    let source = match std::env::var("FERRITE_BENCH_QUANT") {
        Ok(scheme) => {
            let t = Instant::now();
            let w = ferrite_model::dummy::quantized::random_quantized(&config, &scheme, 0)?;
            let bytes: usize = w.tensors.values().map(|t| t.storage.bytes().len()).sum();
            eprintln!(
                "random {scheme} weights: {:.2} GB of tensors in {:.1} s",
                bytes as f64 / 1e9,
                t.elapsed().as_secs_f64()
            );
            WeightSource::Host(w)
        }
        Err(_) => WeightSource::Dummy { seed: 0 },
    };
    let mut backend = CudaBackend::new(config.clone(), source, options.clone())?;
    if std::env::var("FERRITE_BENCH_SPEC").as_deref() == Ok("eagle3") {
        // A random EAGLE-3 head of the model's shape, loaded before the KV budget is taken.
        let head = ferrite_model::dummy::dummy_eagle3(&config, 1)?;
        backend = backend.with_eagle3(&head)?;
    }
    // FERRITE_BENCH_SPEC=self|other|ngram|suffix: speculative decoding with a controlled
    // acceptance rate. `self` drafts with the same random weights as the target (every draft
    // accepted), `other` with other random weights of the same shape (almost none accepted);
    // `ngram` and `suffix` find little to copy in random prompts. The adaptive policy
    // chooses k up to FERRITE_BENCH_SPEC_K (default 4): the point is to see it keep speculation
    // off where it would lose.
    let (proposer, spec_k) = speculative_proposer(&config, &options)?;
    // FERRITE_BENCH_KV_GIB=8: a KV budget of that many GiB instead of what the GPU has left
    // (to see how many long sequences fit); FERRITE_BENCH_WINDOW_KV_POOL=0: every layer in
    // one pool (`--no-window-kv-pool`).
    let kv = match std::env::var("FERRITE_BENCH_KV_GIB") {
        Ok(gib) => (gib.parse::<f64>()? * (1u64 << 30) as f64) as usize,
        Err(_) => backend.kv_cache_budget()?,
    };
    let window_kv_pool = std::env::var("FERRITE_BENCH_WINDOW_KV_POOL").map_or(true, |v| v != "0");
    let engine_config = EngineConfig {
        page_size: 16,
        kv_cache_memory_bytes: kv,
        max_num_batched_tokens: options.max_num_batched_tokens,
        max_num_seqs,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: false,
        window_kv_pool,
        state_cache: Default::default(),
        max_model_len: Some((input_len + output_len + 16).min(config.max_position_embeddings)),
        eos_token_ids: Vec::new(),
        speculation: SpecOptions {
            num_tokens: spec_k,
            // FERRITE_BENCH_SPEC_FIXED=1: always k drafts (a proposer's cost per step,
            // whatever it earns).
            adaptive: std::env::var("FERRITE_BENCH_SPEC_FIXED").map_or(true, |v| v != "1"),
            disable_by_batch_size: None,
        },
    };
    let mut core = build_engine_core(
        &engine_config,
        Box::new(backend),
        proposer,
        Arc::new(EngineStats::default()),
    )?;
    let ready = started.elapsed().as_secs_f64();
    let vocab = config.vocab_size as u64;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % vocab) as u32
    };
    let t0 = Instant::now();
    for id in 0..n as u64 {
        let prompt: Vec<u32> = (0..input_len).map(|_| next()).collect();
        core.add_request(GenerationRequest {
            id,
            prompt,
            params: SamplingParams {
                temperature: 0.0,
                max_tokens: output_len,
                ignore_eos: true,
                ..Default::default()
            },
            arrival: Instant::now(),
        });
    }
    let (mut generated, mut first_token_at, mut steps) = (0usize, None, 0usize);
    // Host time per step (scheduling + sampling bookkeeping: the GPU idles through it, as
    // there is no overlap yet) against the backend's forward call, over decode-only steps.
    let (mut host, mut forward, mut decode_steps) = (0.0f64, 0.0f64, 0usize);
    let mut most_running = 0;
    // Steps that drafted: the proposer's time and the verifying forward pass's.
    let (mut spec_steps, mut draft_s, mut verify_s) = (0usize, 0.0f64, 0.0f64);
    while core.has_work() {
        let step = core.step_with_stats();
        most_running = most_running.max(core.scheduler().num_running());
        if let Some(s) = step.stats.filter(|s| s.num_tokens == s.num_seqs) {
            host += (s.schedule + s.sample).as_secs_f64();
            forward += s.forward.as_secs_f64();
            decode_steps += 1;
        }
        if let Some(s) = step.stats.filter(|s| !s.draft.is_zero()) {
            spec_steps += 1;
            draft_s += s.draft.as_secs_f64();
            verify_s += s.forward.as_secs_f64();
        }
        for out in step.outputs {
            generated += out.tokens.len();
            if !out.tokens.is_empty() && first_token_at.is_none() {
                first_token_at = Some(t0.elapsed().as_secs_f64());
            }
        }
        steps += 1;
    }
    let total = t0.elapsed().as_secs_f64();
    let ttft = first_token_at.unwrap_or(total);
    let decode_rate = if n == 1 {
        (generated.saturating_sub(1)) as f64 / (total - ttft).max(1e-9)
    } else {
        generated as f64 / total
    };
    println!(
        "RESULT preset={preset} requests={n} in={input_len} out={output_len} eager={eager} load_s={ready:.2} \
         total_s={total:.3} first_token_s={ttft:.4} steps={steps} generated={generated} output_tok_s={:.1} decode_tok_s={decode_rate:.1} prefill_tok_s={:.1} \
         decode_step_host_us={:.1} decode_step_forward_us={:.1}",
        generated as f64 / total,
        (n * input_len) as f64 / ttft.max(1e-9),
        1e6 * host / decode_steps.max(1) as f64,
        1e6 * forward / decode_steps.max(1) as f64,
    );
    let kv_state = core.scheduler().kv();
    println!(
        "RESULT kv_gib={:.2} pages={} window_pages={} most_running={most_running}",
        kv as f64 / (1u64 << 30) as f64,
        kv_state.num_pages(),
        kv_state.window_pages().map_or(0, |w| w.num_pages()),
    );
    if let Some(spec) = core.speculation() {
        let c = &spec.counters;
        println!(
            "RESULT spec={} drafted={} accepted={} rounds={} spec_steps={spec_steps} \
             draft_ms_per_step={:.3} verify_ms_per_step={:.3}",
            spec.method(),
            c.num_draft_tokens,
            c.num_accepted_tokens,
            c.num_drafts,
            1e3 * draft_s / spec_steps.max(1) as f64,
            1e3 * verify_s / spec_steps.max(1) as f64,
        );
    }
    if n == 1 {
        // The same shape again, now that the engine has served a request: the warm prefill,
        // reported beside the first one (issue 16 asks for the first request <= 1.1x this).
        let warm = (0..3)
            .map(|i| {
                let prompt: Vec<u32> = (0..input_len).map(|_| next()).collect();
                time_to_first_token(&mut core, 1_000 + i, prompt)
            })
            .fold(f64::INFINITY, f64::min);
        println!(
            "RESULT preset={preset} warm_first_token_s={warm:.4} first_over_warm={:.2}",
            ttft / warm
        );
    }
    Ok(())
}

/// The proposer FERRITE_BENCH_SPEC asks for (see `main`), and the drafts per step at most.
fn speculative_proposer(
    config: &ferrite_model::config::ModelConfig,
    options: &CudaOptions,
) -> anyhow::Result<(Option<Box<dyn Proposer>>, usize)> {
    let k = match std::env::var("FERRITE_BENCH_SPEC_K") {
        Ok(k) => k.parse()?,
        Err(_) => 4,
    };
    let draft = |seed: u64| -> anyhow::Result<Box<dyn Proposer>> {
        let backend = CudaBackend::new(
            config.clone(),
            WeightSource::Dummy { seed },
            options.clone(),
        )?;
        Ok(Box::new(DraftModel::new(Box::new(backend))?))
    };
    let proposer: Box<dyn Proposer> = match std::env::var("FERRITE_BENCH_SPEC").as_deref() {
        Err(_) => return Ok((None, k)),
        Ok("self") => draft(0)?,
        Ok("other") => draft(1)?,
        Ok("ngram") => Box::new(NgramProposer::default()),
        Ok("suffix") => Box::new(SuffixProposer::new(Default::default())),
        Ok("mtp") => Box::new(HeadProposer::mtp()),
        Ok("eagle3") => Box::new(HeadProposer::eagle3()),
        Ok(other) => {
            anyhow::bail!("FERRITE_BENCH_SPEC={other}: self, other, ngram, suffix, mtp or eagle3")
        }
    };
    eprintln!(
        "speculative decoding: {} with up to {k} drafts",
        proposer.name()
    );
    Ok((Some(proposer), k))
}

/// Seconds from adding one request to its first token (it then runs to its end).
fn time_to_first_token(core: &mut ferrite_engine::EngineCore, id: u64, prompt: Vec<u32>) -> f64 {
    let t0 = Instant::now();
    core.add_request(GenerationRequest {
        id,
        prompt,
        params: SamplingParams {
            temperature: 0.0,
            max_tokens: 1,
            ignore_eos: true,
            ..Default::default()
        },
        arrival: Instant::now(),
    });
    let mut first = None;
    while core.has_work() {
        for out in core.step_with_stats().outputs {
            if !out.tokens.is_empty() && first.is_none() {
                first = Some(t0.elapsed().as_secs_f64());
            }
        }
    }
    first.unwrap_or_else(|| t0.elapsed().as_secs_f64())
}
