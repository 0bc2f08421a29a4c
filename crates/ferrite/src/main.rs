//! The `ferrite` binary: glues the model loader, the CPU backend, the engine and the server.

mod bench;
mod bench_model;
mod byte_size;
mod cli;
mod default_model;
mod engine_setup;
mod generate;
mod logging;
mod model_source;
mod serve;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    let log_format = match &cli.command {
        cli::Command::Serve(args) => args.log_format,
        cli::Command::Generate(_) | cli::Command::Bench(_) | cli::Command::BenchModel(_) => {
            cli::LogFormat::Text
        }
    };
    logging::init(log_format);
    match cli.command {
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::Generate(args) => generate::run(args),
        cli::Command::Bench(args) => bench::run(args),
        cli::Command::BenchModel(args) => bench_model::run(args),
    }
}
