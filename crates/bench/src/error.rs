//! Why a benchmark run could not start or finish (individual request failures are not errors:
//! they are recorded and reported).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error("invalid benchmark configuration: {0}")]
    Config(String),
    #[error("invalid server URL `{url}`: {why}")]
    Url { url: String, why: String },
    #[error("cannot reach {url}: {why}")]
    Http { url: String, why: String },
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("dataset {path}, line {line}: {why}")]
    Dataset {
        path: String,
        line: usize,
        why: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
