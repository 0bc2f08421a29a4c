//! `ferrite bench`: a load generator for any OpenAI-compatible server (ferrite, llama-server,
//! vLLM, SGLang), in the spirit of `vllm bench serve` and `sglang.bench_serving`.
//!
//! It sends a workload's streaming requests to one server URL, under Poisson arrivals or a
//! concurrency limit, bounded in count (`num_requests`) and time (`max_duration`), times every
//! token-carrying chunk, and reports throughput, TTFT / ITL / TPOT / end-to-end latency
//! percentiles, goodput under SLOs, and the server's prefix-cache hit rate.
//! `docs/benchmarks.md` defines the workloads and the metrics.

pub mod arrival;
pub mod client;
pub mod config;
pub mod error;
pub mod progress;
pub mod record;
pub mod render;
pub mod replay;
pub mod report;
pub mod request;
pub mod runner;
pub mod server_metrics;
pub mod session;
pub mod sse;
pub mod stats;
pub mod text;
pub mod workload;

pub use config::{BenchConfig, Endpoint, LenRange, Slo, WorkloadKind, WorkloadOverrides};
pub use error::BenchError;
pub use render::render;
pub use report::BenchReport;
pub use runner::run;
pub use text::{TokenCounter, WordCounter};
