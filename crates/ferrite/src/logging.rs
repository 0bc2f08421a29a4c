//! Where `tracing` events go: stderr, as text or one JSON object per line.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// `RUST_LOG` filters as usual (default `default_filter`, in its syntax).
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Colour codes only where someone reads them; they garble files and pipes.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        // Event fields at the top level of each object, where log pipelines look for them.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}
