//! What a benchmark run is asked to do: target, workload, load shape, bounds and SLOs.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::error::BenchError;

/// Which OpenAI endpoint the requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    /// `POST /v1/completions` with a text prompt.
    Completions,
    /// `POST /v1/chat/completions` with messages.
    Chat,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/v1/completions",
            Endpoint::Chat => "/v1/chat/completions",
        }
    }
}

/// A length in tokens: one value, or an inclusive range `MIN-MAX` sampled uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LenRange {
    pub min: usize,
    pub max: usize,
}

impl LenRange {
    pub const fn fixed(n: usize) -> Self {
        Self { min: n, max: n }
    }
    pub const fn between(min: usize, max: usize) -> Self {
        Self { min, max }
    }
    pub fn sample(&self, rng: &mut impl rand::Rng) -> usize {
        rng.random_range(self.min..=self.max)
    }
    pub fn mean(&self) -> f64 {
        (self.min + self.max) as f64 / 2.0
    }
}

impl FromStr for LenRange {
    type Err = BenchError;
    /// `256` or `300-1000`.
    fn from_str(s: &str) -> Result<Self, BenchError> {
        let bad = || BenchError::Config(format!("`{s}` is not a length: give N or MIN-MAX"));
        let parse = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
        let range = match s.split_once('-') {
            Some((a, b)) => LenRange::between(parse(a)?, parse(b)?),
            None => LenRange::fixed(parse(s)?),
        };
        if range.min > range.max {
            return Err(BenchError::Config(format!(
                "length range `{s}` has its minimum above its maximum"
            )));
        }
        Ok(range)
    }
}

/// Service-level objectives a request must all meet to count towards goodput.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Slo {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Largest gap between two token-carrying chunks of the request, ms.
    pub itl_ms: Option<f64>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<f64>,
}

impl Slo {
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none()
            && self.itl_ms.is_none()
            && self.tpot_ms.is_none()
            && self.e2e_ms.is_none()
    }
}

impl FromStr for Slo {
    type Err = BenchError;
    /// `ttft=500,itl=100ms,e2e=10s`: plain numbers are milliseconds.
    fn from_str(s: &str) -> Result<Self, BenchError> {
        let mut slo = Slo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                BenchError::Config(format!("SLO `{part}` is not KEY=VALUE (e.g. ttft=500)"))
            })?;
            let ms = parse_millis(value.trim())?;
            let slot = match key.trim() {
                "ttft" => &mut slo.ttft_ms,
                "itl" => &mut slo.itl_ms,
                "tpot" => &mut slo.tpot_ms,
                "e2e" | "e2el" => &mut slo.e2e_ms,
                other => {
                    return Err(BenchError::Config(format!(
                        "unknown SLO `{other}`: use ttft, itl, tpot or e2e"
                    )))
                }
            };
            *slot = Some(ms);
        }
        if slo.is_empty() {
            return Err(BenchError::Config("the SLO list is empty".into()));
        }
        Ok(slo)
    }
}

fn parse_millis(v: &str) -> Result<f64, BenchError> {
    let (number, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (v, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x * scale),
        _ => Err(BenchError::Config(format!(
            "SLO value `{v}` is not a positive duration (500, 500ms, 0.5s)"
        ))),
    }
}

/// The archetypes, the synthetic baseline, and replay. See `workload.rs` for what each sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    Chatbot,
    Agent,
    Batch,
    Random,
    Replay,
}

/// Lengths the user set; `None` takes the workload's default.
#[derive(Debug, Clone, Default)]
pub struct WorkloadOverrides {
    pub input_len: Option<LenRange>,
    pub output_len: Option<LenRange>,
    pub prefix_len: Option<usize>,
    pub turns: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The server's root, e.g. `http://127.0.0.1:8000` (a trailing `/v1` is accepted).
    pub url: String,
    /// `None`: the first model `GET /v1/models` lists.
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub endpoint: Endpoint,
    pub workload: WorkloadKind,
    pub lengths: WorkloadOverrides,
    /// The JSONL file of the replay workload.
    pub dataset: Option<PathBuf>,
    /// Requests to send at most.
    pub num_requests: usize,
    /// Poisson arrivals at this mean rate (requests/s); `None`: send as fast as allowed.
    pub request_rate: Option<f64>,
    pub max_concurrency: Option<usize>,
    /// The run stops issuing and cancels what is outstanding after this long.
    pub max_duration: Duration,
    pub seed: u64,
    pub ignore_eos: bool,
    pub temperature: f32,
    pub slo: Option<Slo>,
    /// Draw a progress line on stderr.
    pub progress: bool,
}

impl BenchConfig {
    /// A config with the defaults the CLI uses, against `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: None,
            api_key: None,
            endpoint: Endpoint::Completions,
            workload: WorkloadKind::Random,
            lengths: WorkloadOverrides::default(),
            dataset: None,
            num_requests: 100,
            request_rate: None,
            max_concurrency: None,
            max_duration: Duration::from_secs(600),
            seed: 0,
            ignore_eos: true,
            temperature: 0.0,
            slo: None,
            progress: false,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.num_requests == 0 {
            return invalid("--num-requests must be at least 1");
        }
        if self.max_concurrency == Some(0) {
            return invalid("--max-concurrency must be at least 1");
        }
        if let Some(r) = self.request_rate {
            if !(r.is_finite() && r > 0.0) {
                return invalid("--request-rate must be a positive number of requests/s");
            }
        }
        if self.max_duration.is_zero() {
            return invalid("--max-duration must be positive");
        }
        if (self.workload == WorkloadKind::Replay) != self.dataset.is_some() {
            return invalid("the replay workload needs --dataset FILE, and only it takes one");
        }
        if self.lengths.turns == Some(0) {
            return invalid("--turns must be at least 1");
        }
        if matches!(self.lengths.output_len, Some(r) if r.min == 0) {
            return invalid("--output-len must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_parse_as_values_or_ranges() {
        assert_eq!("256".parse::<LenRange>().unwrap(), LenRange::fixed(256));
        assert_eq!(
            "300-1000".parse::<LenRange>().unwrap(),
            LenRange::between(300, 1000)
        );
        assert!("10-5".parse::<LenRange>().is_err());
        assert!("x".parse::<LenRange>().is_err());
    }

    #[test]
    fn slos_take_milliseconds_or_units() {
        let slo: Slo = "ttft=500,itl=0.1s, e2e=2000ms".parse().unwrap();
        assert_eq!(slo.ttft_ms, Some(500.0));
        assert_eq!(slo.itl_ms, Some(100.0));
        assert_eq!(slo.e2e_ms, Some(2000.0));
        assert_eq!(slo.tpot_ms, None);
        assert!("ttft".parse::<Slo>().is_err());
        assert!("latency=5".parse::<Slo>().is_err());
        assert!("ttft=-1".parse::<Slo>().is_err());
        assert!("".parse::<Slo>().is_err());
    }
}
