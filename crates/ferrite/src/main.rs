//! The `ferrite` binary: glues the model loader, the CPU backend, the engine and the server.

mod bench;
mod bench_model;
mod byte_size;
mod cli;
mod default_model;
mod engine_setup;
mod generate;
mod model_source;
mod serve;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::Cli::parse().command {
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::Generate(args) => generate::run(args),
        cli::Command::Bench(args) => bench::run(args),
        cli::Command::BenchModel(args) => bench_model::run(args),
    }
}
