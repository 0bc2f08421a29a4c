//! Command-line interface: `ferrite serve`, `run-batch`, `generate`, `bench`, `bench-model`,
//! `doctor` and `completions`.

use clap::{Parser, Subcommand};

mod bench_args;
mod doctor_args;
mod engine_args;
mod generate_args;
mod run_batch_args;
mod serve_args;
mod vllm_args;

pub use bench_args::{BenchArgs, BenchModelArgs, EndpointArg, WorkloadArg};
pub use doctor_args::DoctorArgs;
pub use engine_args::{Device, EngineArgs, LoadFormat, Quantization, SpecArgs, SpecMethod};
pub use generate_args::GenerateArgs;
pub use run_batch_args::RunBatchArgs;
pub use serve_args::{
    ChatFormatArgs, ChatRendererArg, LogFormat, MetricsNamesArg, ReasoningParserArg, ServeArgs,
    ToolCallParserArg,
};
pub use vllm_args::VllmArgs;

/// The topics `--help` groups flags under. clap prints the headings in the order their first
/// flags are defined, so the argument structs are flattened in this order: the model first,
/// operations last.
pub mod heading {
    pub const MODEL: &str = "Model";
    pub const ENGINE: &str = "Engine";
    pub const MEMORY: &str = "Memory";
    pub const SPECULATIVE: &str = "Speculative decoding";
    pub const API: &str = "API";
    pub const OPERATIONS: &str = "Operations";
}

#[derive(Debug, Parser)]
#[command(
    name = "ferrite",
    version,
    about = "An LLM inference engine with an OpenAI-compatible server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line, with the model architectures the registry knows appended to the long
    /// help of every command that loads a model.
    pub fn parse_with_architectures() -> Cli {
        use clap::{CommandFactory, FromArgMatches};
        let architectures = ferrite_model::arch::supported_summary();
        let mut command = Cli::command()
            .version(version())
            .after_long_help(architectures.clone());
        for name in ["serve", "run-batch", "generate", "bench-model", "doctor"] {
            command = command.mut_subcommand(name, |c| c.after_long_help(architectures.clone()));
        }
        let matches = command.get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

/// `ferrite completions SHELL`: the script for the command line as declared (the long help's
/// architecture list is no part of completion). Written whole; a reader that stops early
/// (`| head`) is no error.
pub fn print_completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    use clap::CommandFactory;
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "ferrite", &mut script);
    match std::io::stdout().lock().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `ferrite --version`: the crate version, the commit built (build.rs) and how the CUDA kernels
/// get to the GPU, the three things a bug report needs.
fn version() -> &'static str {
    let kernels = if ferrite_cuda::kernel_sources::has_prebuilt_cubins() {
        "built in (sm_90 cubins, compiled by nvcc)"
    } else {
        "not built in (no nvcc at build time: NVRTC compiles their sources at start-up)"
    };
    let text = format!(
        "{} (commit {}; CUDA kernels {kernels})",
        env!("CARGO_PKG_VERSION"),
        env!("FERRITE_GIT_COMMIT")
    );
    // Once per process; clap keeps `&'static str` without its `string` feature.
    Box::leak(text.into_boxed_str())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a model over the OpenAI HTTP API.
    Serve(ServeArgs),
    /// Run a file of requests in the OpenAI Batch format through the engine, in-process (no
    /// HTTP server), writing one result line per request; resumable.
    RunBatch(RunBatchArgs),
    /// Generate one completion and print it as it is produced.
    Generate(GenerateArgs),
    /// Load-test an OpenAI-compatible server (ferrite, llama-server, vLLM, SGLang) and report
    /// throughput, TTFT / ITL / TPOT / end-to-end latency, goodput and prefix-cache reuse.
    Bench(BenchArgs),
    /// Measure a model's prefill and decode speed in-process, without HTTP (like llama-bench).
    BenchModel(BenchModelArgs),
    /// Check a model before serving it: chat template, stop ids, special tokens, vocabulary,
    /// backend support, memory and a greedy run, one line each with the fix; exit status 1 on
    /// any error.
    #[command(long_about = doctor_args::LONG_ABOUT)]
    Doctor(DoctorArgs),
    /// Print a shell completion script for ferrite on stdout.
    #[command(long_about = COMPLETIONS_ABOUT)]
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

const COMPLETIONS_ABOUT: &str = "Print a shell completion script for ferrite on stdout: \
subcommands, flags and their values complete on Tab.

bash:  ferrite completions bash > ~/.local/share/bash-completion/completions/ferrite
zsh:   ferrite completions zsh > ~/.zfunc/_ferrite   (with fpath+=~/.zfunc before compinit)
fish:  ferrite completions fish > ~/.config/fish/completions/ferrite.fish";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_prints_its_headings_model_first_operations_last() {
        let command = Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        let mut headings: Vec<&str> = Vec::new();
        for heading in serve.get_arguments().filter_map(|a| a.get_help_heading()) {
            if !headings.contains(&heading) {
                headings.push(heading);
            }
        }
        use heading::*;
        assert_eq!(
            headings,
            [MODEL, ENGINE, MEMORY, SPECULATIVE, API, OPERATIONS]
        );
    }
}
