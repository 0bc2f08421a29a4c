//! `ferrite bench`: the flags become a [`BenchConfig`]; the load generator is ferrite-bench.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use ferrite_bench::{BenchConfig, Endpoint, TokenCounter, WordCounter, WorkloadKind};
use ferrite_model::gguf::GgufFile;
use ferrite_model::tokenizer::LoadedTokenizer;

use crate::cli::{BenchArgs, EndpointArg, WorkloadArg};

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let config = config_of(&args)?;
    let counter: Arc<dyn TokenCounter> = match &args.tokenizer {
        Some(path) => Arc::new(TokenizerCounter::load(path)?),
        None => Arc::new(WordCounter),
    };
    // One thread: the client's work per token is tiny, and the server needs the cores.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut report = runtime.block_on(ferrite_bench::run(&config, counter))?;
    if !args.per_request {
        report.requests.clear();
    }
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(path) = &args.output {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", ferrite_bench::render(&report));
    }
    if report.completed == 0 {
        bail!("no request completed");
    }
    Ok(())
}

fn config_of(args: &BenchArgs) -> anyhow::Result<BenchConfig> {
    if !(args.max_duration.is_finite() && args.max_duration > 0.0) {
        bail!("--max-duration must be a positive number of seconds");
    }
    let mut c = BenchConfig::new(&args.url);
    c.model = args.model.clone();
    c.api_key = args.api_key.clone();
    c.endpoint = match args.endpoint {
        EndpointArg::Completions => Endpoint::Completions,
        EndpointArg::Chat => Endpoint::Chat,
    };
    c.workload = match args.workload {
        WorkloadArg::Chatbot => WorkloadKind::Chatbot,
        WorkloadArg::Agent => WorkloadKind::Agent,
        WorkloadArg::Batch => WorkloadKind::Batch,
        WorkloadArg::Random => WorkloadKind::Random,
        WorkloadArg::Replay => WorkloadKind::Replay,
    };
    c.dataset = args.dataset.clone();
    c.lengths.input_len = args.input_len;
    c.lengths.output_len = args.output_len;
    c.lengths.prefix_len = args.prefix_len;
    c.lengths.turns = args.turns;
    c.num_requests = args.num_requests;
    // `inf` is vLLM's spelling of "no rate".
    c.request_rate = args.request_rate.filter(|r| r.is_finite());
    c.max_concurrency = args.max_concurrency;
    c.max_duration = Duration::from_secs_f64(args.max_duration);
    c.seed = args.seed;
    c.ignore_eos = !args.no_ignore_eos;
    c.temperature = args.temperature;
    c.slo = args.slo.clone();
    c.progress = !args.no_progress;
    c.validate()?;
    Ok(c)
}

/// Counts tokens with the server model's tokenizer, from a GGUF file or a `tokenizer.json`.
struct TokenizerCounter {
    tokenizer: tokenizers::Tokenizer,
    source: String,
}

impl TokenizerCounter {
    fn load(path: &Path) -> anyhow::Result<Self> {
        let is_gguf = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        let tokenizer = if is_gguf {
            let file =
                GgufFile::open(path).with_context(|| format!("opening {}", path.display()))?;
            LoadedTokenizer::from_gguf_metadata(file.metadata())?.tokenizer
        } else {
            tokenizers::Tokenizer::from_file(path)
                .map_err(|e| anyhow::anyhow!("cannot load {}: {e}", path.display()))?
        };
        Ok(Self {
            tokenizer,
            source: path.display().to_string(),
        })
    }
}

impl TokenCounter for TokenizerCounter {
    fn count(&self, text: &str) -> usize {
        // Without special tokens: the server adds BOS once per prompt, not per piece.
        self.tokenizer
            .encode(text, false)
            .map(|e| e.len())
            .unwrap_or_else(|_| text.split_whitespace().count())
    }
    fn describe(&self) -> String {
        format!("tokenizer of {}", self.source)
    }
}
