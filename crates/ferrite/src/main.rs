//! The `ferrite` binary: glues the model loader, the CPU backend and the CUDA backend
//! (`--device cuda`), the engine, the server and the benchmark client together.

mod bench;
mod bench_model;
mod byte_size;
mod cli;
mod context_limit;
mod default_model;
mod device_defaults;
mod doctor;
mod engine_setup;
mod generate;
mod logging;
mod model_source;
mod run_batch;
mod serve;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse_with_architectures();
    let (log_format, log_filter) = match &cli.command {
        cli::Command::Serve(args) => (args.log_format, "info"),
        cli::Command::RunBatch(_) => (cli::LogFormat::Text, run_batch::LOG_FILTER),
        cli::Command::Generate(_) | cli::Command::Bench(_) | cli::Command::BenchModel(_) => {
            (cli::LogFormat::Text, "info")
        }
        // Its report is the output; the loader's progress would only interleave with it.
        cli::Command::Doctor(_) | cli::Command::Completions { .. } => {
            (cli::LogFormat::Text, "warn")
        }
    };
    logging::init(log_format, log_filter);
    match cli.command {
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::RunBatch(args) => run_batch::run(args),
        cli::Command::Generate(args) => generate::run(args),
        cli::Command::Bench(args) => bench::run(args),
        cli::Command::BenchModel(args) => bench_model::run(args),
        cli::Command::Doctor(args) => doctor::run(args),
        cli::Command::Completions { shell } => cli::print_completions(shell),
    }
}
