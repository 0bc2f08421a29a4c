//! `ferrite run-batch`: a file of requests in the OpenAI Batch format, run through the same
//! router and engine `ferrite serve` builds, in-process (no sockets): each line's `body` goes
//! to its `url` as a POST, many at once to keep the engine's batch full, and each answer is
//! appended to the output file as it finishes. An existing output file is resumed
//! (`--retry-failed`: its failed results run again).

mod input;
mod output;
mod pipeline;
mod resume;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context};
use ferrite_server::{MetricNames, RequestLogConfig, ServerConfig, StoreLimits};

use crate::cli::RunBatchArgs;
use crate::engine_setup::start_engine;
use crate::{model_source, serve};
use input::Classifier;
use output::ResultSink;

/// `tracing`'s default filter: the one-line-per-request log that `ferrite serve` writes would
/// bury the progress bar.
pub const LOG_FILTER: &str = "info,ferrite_server::request_log=warn";

/// Lines read ahead of the requests in flight.
const READ_AHEAD: usize = 64;

pub fn run(args: RunBatchArgs) -> anyhow::Result<()> {
    let max_concurrency = args.max_concurrency.unwrap_or(2 * args.engine.max_num_seqs);
    if max_concurrency == 0 {
        bail!("--max-concurrency must be at least 1");
    }
    let input_path = std::fs::canonicalize(&args.input)
        .with_context(|| format!("opening {}", args.input.display()))?;
    if std::fs::canonicalize(&args.output).is_ok_and(|out| out == input_path) {
        bail!("the output file is the input file");
    }
    let total = input::count_lines(&args.input)?;
    let resumed = resume::open(&args.output, args.retry_failed)?;
    let (file, done, retried) = (resumed.file, resumed.done, resumed.retried);
    let already = (done.custom_ids.len() + done.lines.len()) as u64;
    if already > 0 || retried > 0 {
        tracing::info!(
            "{} holds {already} results to keep: resuming{}",
            args.output.display(),
            if retried > 0 {
                format!(", running {retried} failed ones again")
            } else {
                String::new()
            }
        );
    }

    let mut model = model_source::load_model(args.spec(), &args.engine)?;
    let engine = start_engine(&mut model, &args.engine)?;
    let text = serve::text_model(&model, &args.chat);
    let served_model_name = args.served_model_name.unwrap_or(model.name);
    // `--model`, as vLLM's flag, names the model every line goes to, whatever its body says.
    let model_override = args.model_flag.is_some().then(|| served_model_name.clone());
    let config = ServerConfig {
        host: String::new(),
        port: 0,
        served_model_name,
        api_key: None,
        // The in-flight bound is the back-pressure here: never answer 503.
        max_waiting: usize::MAX / 2,
        tokenizer_workers: args.chat.tokenizer_workers,
        vocab_size: engine.vocab_size,
        expert_load_metrics: false,
        metrics_names: MetricNames::Ferrite,
        sampling_defaults: serve::sampling_defaults(&model.generation),
        request_log: RequestLogConfig::default(),
        tool_call_parser: serve::tool_call_parser(args.chat.tool_call_parser),
        reasoning_parser: serve::reasoning_parser(args.chat.reasoning_parser),
        tracer: None,
        cors: None,
        // The batch file is the operator's own, not a remote client's.
        trust_request_chat_template: true,
        // Batch lines are independent requests: nothing to continue or poll.
        responses_store: StoreLimits {
            capacity: 0,
            ..StoreLimits::default()
        },
    };
    // As `ferrite serve`'s: the engine's scheduler thread does the heavy work.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut sink = ResultSink::new(file, total);
    let sink = runtime.block_on(async move {
        let state = ferrite_server::start_pipeline(&config, &text, engine.handle, engine.outputs)?;
        let router = ferrite_server::router(state);
        let (tx, rx) = tokio::sync::mpsc::channel(READ_AHEAD);
        let input = args.input.clone();
        let reader = tokio::task::spawn_blocking(move || {
            input::read_batch(&input, Classifier::new(done, model_override), tx)
        });
        sink.start_clock();
        let sink = Arc::new(sink);
        let ran = pipeline::run_all(router, rx, Arc::clone(&sink), max_concurrency).await;
        sink.finish();
        ran?;
        reader.await??;
        anyhow::Ok(sink)
    })?;
    print_summary(&sink, already, retried, &args.output);
    Ok(())
}

fn print_summary(sink: &ResultSink, skipped: u64, retried: usize, output: &std::path::Path) {
    let t = &sink.tally;
    let ok = t.ok.load(Ordering::Relaxed);
    let failed = t.failed();
    let secs = sink.elapsed().as_secs_f64();
    println!("requests       {} ({ok} ok, {failed} failed: {} answered with an error status, {} invalid lines)",
        ok + failed,
        t.error_status.load(Ordering::Relaxed),
        t.invalid.load(Ordering::Relaxed));
    if skipped > 0 {
        println!(
            "skipped        {skipped} (results already in {})",
            output.display()
        );
    }
    if retried > 0 {
        println!("retried        {retried} (failed results replaced by this run's)");
    }
    let other_model = t.other_model.load(Ordering::Relaxed);
    if other_model > 0 {
        println!(
            "hint           {other_model} bodies name another model than the one served: \
             give the model as --model MODEL to send every line to it (with --retry-failed \
             to run those again)"
        );
    }
    println!("elapsed        {secs:.2} s");
    println!(
        "output tokens  {} ({:.1} tok/s)",
        t.output_tokens.load(Ordering::Relaxed),
        sink.output_tokens_per_s()
    );
    println!("results in     {}", output.display());
}
