//! `ferrite bench-model`: llama-bench's tests on ferrite's engine, in-process (no HTTP, no
//! tokenizer), so the two can be compared on the same GGUF file and thread count.
//!
//! - `ppN`: one request of N random prompt token ids and one output token; N / time to that
//!   token. Like llama-bench's pp, which times the prompt's forward pass.
//! - `tgN`: one request of a single prompt token generating N + 1 tokens with `ignore_eos`;
//!   N / time from the first token to the last, i.e. N batch-1 decode steps. llama-bench's tg
//!   also decodes N tokens one at a time from an empty context.
//! - `ppN+tgM xB` (with `--batch B`): B such requests submitted at once; B·M / wall time from
//!   submission to the last token: aggregate output tokens/s of offline serving.
//!
//! Every run draws new prompt ids, so the prefix cache never helps; results are the mean ±
//! sample standard deviation of `--repetitions` runs after one warm-up, as llama-bench reports.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ferrite_bench::stats::{mean, stddev};
use ferrite_engine::{GenerationRequest, SamplingParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::cli::BenchModelArgs;
use crate::engine_setup::{start_engine, RunningEngine};
use crate::model_source;

/// A run that takes longer than this is stuck, not slow.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy)]
struct Test {
    prompt_len: usize,
    gen_len: usize,
    batch: usize,
}

impl Test {
    fn name(&self) -> String {
        match (self.prompt_len, self.gen_len, self.batch) {
            (p, 0, 1) => format!("pp{p}"),
            (1, g, 1) => format!("tg{g}"),
            (p, g, b) => format!("pp{p}+tg{g} x{b}"),
        }
    }
}

pub fn run(args: BenchModelArgs) -> anyhow::Result<()> {
    if args.repetitions == 0 || args.batch == 0 {
        bail!("--repetitions and --batch must be at least 1");
    }
    let mut tests = Vec::new();
    if args.prompt_len > 0 {
        tests.push(Test {
            prompt_len: args.prompt_len,
            gen_len: 0,
            batch: 1,
        });
    }
    if args.gen_len > 0 {
        tests.push(Test {
            prompt_len: 1,
            gen_len: args.gen_len,
            batch: 1,
        });
    }
    if args.batch > 1 {
        if args.prompt_len == 0 || args.gen_len == 0 {
            bail!("--batch needs both --prompt-len and --gen-len above 0");
        }
        tests.push(Test {
            prompt_len: args.prompt_len,
            gen_len: args.gen_len,
            batch: args.batch,
        });
    }
    if tests.is_empty() {
        bail!("nothing to measure: --prompt-len and --gen-len are both 0");
    }
    let mut model = model_source::load_model(args.model.as_deref(), &args.engine)?;
    let name = model.name.clone();
    let threads = args
        .engine
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let engine = start_engine(&mut model, &args.engine)?;
    let mut driver = Driver {
        engine,
        rng: StdRng::seed_from_u64(args.seed),
        next_id: 1,
    };

    let mut rows = Vec::new();
    for test in &tests {
        if !args.no_warmup && test.batch == 1 {
            driver.measure(test)?;
        }
        let samples = (0..args.repetitions)
            .map(|_| driver.measure(test))
            .collect::<anyhow::Result<Vec<f64>>>()?;
        rows.push((test.name(), *test, samples));
    }

    if args.json {
        let results: Vec<_> = rows
            .iter()
            .map(|(test_name, t, s)| {
                json!({"test": test_name, "n_prompt": t.prompt_len, "n_gen": t.gen_len,
                    "batch": t.batch, "avg_ts": mean(s), "stddev_ts": stddev(s), "samples_ts": s})
            })
            .collect();
        let out = json!({"model": name, "threads": threads, "repetitions": args.repetitions,
            "results": results});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("| model | threads | test | t/s |");
        println!("| --- | ---: | ---: | ---: |");
        for (test_name, _, s) in &rows {
            println!(
                "| {name} | {threads} | {test_name} | {:.2} ± {:.2} |",
                mean(s),
                stddev(s)
            );
        }
    }
    Ok(())
}

struct Driver {
    engine: RunningEngine,
    rng: StdRng,
    next_id: u64,
}

impl Driver {
    /// One run of `test`: its tokens per second.
    fn measure(&mut self, test: &Test) -> anyhow::Result<f64> {
        // tgN asks for N + 1 tokens: the first comes from the prompt's forward pass.
        let max_tokens = if test.batch == 1 && test.prompt_len == 1 {
            test.gen_len + 1
        } else {
            test.gen_len.max(1)
        };
        let timing = self.submit_and_wait(test.prompt_len, max_tokens, test.batch)?;
        let rate = match (test.prompt_len, test.gen_len, test.batch) {
            (p, 0, 1) => p as f64 / (timing.first_token[0] - timing.submitted).as_secs_f64(),
            (1, g, 1) => g as f64 / (timing.last_token - timing.first_token[0]).as_secs_f64(),
            (_, g, b) => (g * b) as f64 / (timing.last_token - timing.submitted).as_secs_f64(),
        };
        Ok(rate)
    }

    /// Submits `batch` requests of `prompt_len` random ids at once and waits for all.
    fn submit_and_wait(
        &mut self,
        prompt_len: usize,
        max_tokens: usize,
        batch: usize,
    ) -> anyhow::Result<Timing> {
        let vocab = self.engine.vocab_size as u32;
        let params = SamplingParams {
            temperature: 0.0,
            max_tokens,
            ignore_eos: true,
            ..SamplingParams::default()
        };
        let mut pending: HashMap<u64, usize> = HashMap::new();
        let prompts: Vec<Vec<u32>> = (0..batch)
            .map(|_| {
                (0..prompt_len)
                    .map(|_| self.rng.random_range(0..vocab))
                    .collect()
            })
            .collect();
        let submitted = Instant::now();
        for (i, prompt) in prompts.into_iter().enumerate() {
            let id = self.next_id;
            self.next_id += 1;
            pending.insert(id, i);
            self.engine.handle.add_request(GenerationRequest {
                id,
                prompt,
                params: params.clone(),
                arrival: submitted,
            })?;
        }
        let mut first_token: Vec<Option<Instant>> = vec![None; batch];
        let mut generated = vec![0usize; batch];
        let mut last_token = submitted;
        while !pending.is_empty() {
            let step = self
                .engine
                .outputs
                .recv_timeout(STEP_TIMEOUT)
                .context("the engine stopped answering")?;
            let now = Instant::now();
            for out in step.outputs {
                let Some(&i) = pending.get(&out.id) else {
                    continue;
                };
                if !out.tokens.is_empty() {
                    first_token[i].get_or_insert(now);
                    generated[i] += out.tokens.len();
                    last_token = now;
                }
                if let Some(why) = out.finish {
                    pending.remove(&out.id);
                    // Anything short of the asked length would make the rate meaningless.
                    if generated[i] != max_tokens {
                        bail!(
                            "a request stopped ({why:?}) after {} of {max_tokens} tokens: \
                             do --prompt-len + --gen-len fit --max-model-len and the KV cache?",
                            generated[i]
                        );
                    }
                }
            }
        }
        let first_token = first_token
            .into_iter()
            .map(|t| t.unwrap_or(last_token))
            .collect();
        Ok(Timing {
            submitted,
            first_token,
            last_token,
        })
    }
}

struct Timing {
    submitted: Instant,
    first_token: Vec<Instant>,
    last_token: Instant,
}
