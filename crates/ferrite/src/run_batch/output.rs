//! The output file: one OpenAI Batch result line per request, written whole and at once as each
//! request finishes, so that a killed run loses only the requests in flight.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use serde_json::Value;

use super::input::Refusal;

/// `{"id", "custom_id", "response", "error"}`: exactly one of `response` and `error` is set.
#[derive(Debug, Serialize)]
pub struct OutputLine {
    pub id: String,
    pub custom_id: Option<String>,
    pub response: Option<ResponseRecord>,
    pub error: Option<LineError>,
}

/// The endpoint's answer, whatever its status.
#[derive(Debug, Serialize)]
pub struct ResponseRecord {
    pub status_code: u16,
    pub request_id: String,
    pub body: Value,
}

/// Why a line was not sent (OpenAI's batch error object, with the input line's number).
#[derive(Debug, Serialize)]
pub struct LineError {
    pub code: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    pub line: usize,
}

impl OutputLine {
    pub fn answered(custom_id: String, status_code: u16, body: Value) -> Self {
        Self {
            id: random_id("batch_req_"),
            custom_id: Some(custom_id),
            response: Some(ResponseRecord {
                status_code,
                request_id: random_id("req_"),
                body,
            }),
            error: None,
        }
    }

    pub fn refused(r: Refusal) -> Self {
        Self {
            id: random_id("batch_req_"),
            custom_id: r.custom_id,
            response: None,
            error: Some(LineError {
                code: r.code,
                message: r.message,
                param: r.param,
                line: r.line,
            }),
        }
    }

    /// Output tokens of a successful answer (`usage.completion_tokens` of the OpenAI routes,
    /// `usage.output_tokens` of the Responses and Messages APIs).
    pub fn output_tokens(&self) -> Option<u64> {
        let response = self.response.as_ref().filter(|r| r.status_code == 200)?;
        let usage = response.body.get("usage")?;
        usage
            .get("completion_tokens")
            .or_else(|| usage.get("output_tokens"))
            .and_then(Value::as_u64)
    }
}

/// Unique across runs (a resumed file mixes lines of several runs), as OpenAI's ids are.
fn random_id(prefix: &str) -> String {
    format!("{prefix}{:032x}", rand::random::<u128>())
}

/// Counts of this run's lines.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: AtomicU64,
    /// Answered with a status other than 200.
    pub error_status: AtomicU64,
    /// Refused before reaching an endpoint.
    pub invalid: AtomicU64,
    /// Answered 404 because the body names another model (OpenAI files name gpt-4o-mini).
    pub other_model: AtomicU64,
    pub output_tokens: AtomicU64,
}

impl Tally {
    pub fn failed(&self) -> u64 {
        self.error_status.load(Ordering::Relaxed) + self.invalid.load(Ordering::Relaxed)
    }
}

/// Writes result lines and keeps the progress bar and the tally.
pub struct ResultSink {
    file: Mutex<File>,
    pub tally: Tally,
    bar: ProgressBar,
    started: Instant,
}

impl ResultSink {
    /// `total`: non-blank input lines.
    pub fn new(file: File, total: u64) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{bar:30} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_secs(1));
        Self {
            file: Mutex::new(file),
            tally: Tally::default(),
            bar,
            started: Instant::now(),
        }
    }

    /// Restarts the clock: the time before the first request (model loading) is not the
    /// batch's.
    pub fn start_clock(&mut self) {
        self.started = Instant::now();
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// A line skipped because the output holds it.
    pub fn skip(&self) {
        self.bar.inc(1);
    }

    /// Appends `line` in one write (a kill leaves at most a partial last line, which a resume
    /// drops) and counts it.
    pub fn write(&self, line: &OutputLine) -> anyhow::Result<()> {
        let mut text = serde_json::to_vec(line)?;
        text.push(b'\n');
        self.file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write_all(&text)?;
        let t = &self.tally;
        match (&line.response, line.output_tokens()) {
            (None, _) => t.invalid.fetch_add(1, Ordering::Relaxed),
            (Some(_), Some(tokens)) => {
                t.output_tokens.fetch_add(tokens, Ordering::Relaxed);
                t.ok.fetch_add(1, Ordering::Relaxed)
            }
            (Some(r), None) if r.status_code == 200 => t.ok.fetch_add(1, Ordering::Relaxed),
            (Some(r), None) => {
                if r.status_code == 404 && r.body["error"]["code"] == "model_not_found" {
                    t.other_model.fetch_add(1, Ordering::Relaxed);
                }
                t.error_status.fetch_add(1, Ordering::Relaxed)
            }
        };
        self.bar.inc(1);
        self.bar.set_message(format!(
            "{} ok, {} failed, {:.0} out tok/s",
            t.ok.load(Ordering::Relaxed),
            t.failed(),
            self.output_tokens_per_s()
        ));
        Ok(())
    }

    pub fn output_tokens_per_s(&self) -> f64 {
        let secs = self.elapsed().as_secs_f64();
        let tokens = self.tally.output_tokens.load(Ordering::Relaxed) as f64;
        if secs > 0.0 {
            tokens / secs
        } else {
            0.0
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_batch_shape_and_count_output_tokens_of_200s_only() {
        let body = serde_json::json!({"usage": {"completion_tokens": 5}});
        let ok = OutputLine::answered("a".into(), 200, body.clone());
        assert_eq!(ok.output_tokens(), Some(5));
        let v = serde_json::to_value(&ok).unwrap();
        assert!(v["id"].as_str().unwrap().starts_with("batch_req_"));
        assert_eq!(v["custom_id"], "a");
        assert_eq!(v["response"]["status_code"], 200);
        assert!(v["response"]["request_id"]
            .as_str()
            .unwrap()
            .starts_with("req_"));
        assert!(v["error"].is_null());
        assert_eq!(
            OutputLine::answered("b".into(), 400, body).output_tokens(),
            None
        );

        let refused = OutputLine::refused(Refusal {
            line: 3,
            custom_id: None,
            code: "invalid_json_line",
            message: "bad".into(),
            param: None,
        });
        let v = serde_json::to_value(&refused).unwrap();
        assert!(v["response"].is_null() && v["custom_id"].is_null());
        assert_eq!(v["error"]["code"], "invalid_json_line");
        assert_eq!(v["error"]["line"], 3);
    }
}
