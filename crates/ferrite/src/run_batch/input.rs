//! Reading the batch file: each non-blank line becomes a request to send, a line refused with
//! an error (bad JSON, a missing field, `stream: true`, a repeated custom_id), or nothing (its
//! result is already in the output file being resumed).

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::Context;
use axum::http::Uri;
use serde_json::{Map, Value};
use tokio::sync::mpsc::Sender;

/// A line to send through the router.
#[derive(Debug)]
pub struct BatchRequest {
    pub custom_id: String,
    pub url: String,
    /// The `body` object, serialized again.
    pub body: Vec<u8>,
}

/// A line answered with an error instead of being sent.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    /// 1-based, counting blank lines too, so that it names the line in an editor.
    pub line: usize,
    /// `None` where it could not be read (or repeats an earlier line's).
    pub custom_id: Option<String>,
    pub code: &'static str,
    pub message: String,
    /// The field at fault.
    pub param: Option<&'static str>,
}

#[derive(Debug)]
pub enum Item {
    Send(BatchRequest),
    Refuse(Refusal),
    /// Its result is in the output file already.
    Skip,
}

/// What an output file being resumed holds results for.
#[derive(Debug, Default)]
pub struct Done {
    pub custom_ids: HashSet<String>,
    /// Lines refused without a custom_id (bad JSON, a repeated custom_id), by line number.
    pub lines: HashSet<usize>,
}

/// Decides each line's fate, remembering the custom_ids seen so far: OpenAI's format needs
/// them unique, and the output must hold each once.
pub struct Classifier {
    done: Done,
    seen: HashSet<String>,
    /// Written into every body's `model` (`--model`).
    model: Option<String>,
}

impl Classifier {
    pub fn new(done: Done, model: Option<String>) -> Self {
        Self {
            done,
            seen: HashSet::new(),
            model,
        }
    }

    pub fn classify(&mut self, line: usize, raw: &[u8]) -> Item {
        if self.done.lines.contains(&line) {
            return Item::Skip;
        }
        let parsed = parse_line(line, raw, self.model.as_deref());
        let custom_id = match &parsed {
            Ok(request) => Some(&request.custom_id),
            Err(refusal) => refusal.custom_id.as_ref(),
        };
        if let Some(id) = custom_id {
            if !self.seen.insert(id.clone()) {
                return Item::Refuse(Refusal {
                    line,
                    custom_id: None,
                    code: "duplicate_custom_id",
                    message: format!("custom_id {id:?} is used by an earlier line"),
                    param: Some("custom_id"),
                });
            }
            if self.done.custom_ids.contains(id) {
                return Item::Skip;
            }
        }
        match parsed {
            Ok(request) => Item::Send(request),
            Err(refusal) => Item::Refuse(refusal),
        }
    }
}

/// One line as a request, or why it cannot be one; `model` replaces the body's `model`.
pub fn parse_line(line: usize, raw: &[u8], model: Option<&str>) -> Result<BatchRequest, Refusal> {
    let refuse = |custom_id: Option<&str>, code, param, message: String| Refusal {
        line,
        custom_id: custom_id.map(str::to_string),
        code,
        message,
        param,
    };
    let value: Value = serde_json::from_slice(raw).map_err(|e| {
        refuse(
            None,
            "invalid_json_line",
            None,
            format!("the line is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(mut fields) = value else {
        let message = "the line must be a JSON object".to_string();
        return Err(refuse(None, "invalid_request", None, message));
    };
    let custom_id = match fields.remove("custom_id") {
        Some(Value::String(id)) => id,
        Some(_) => {
            let message = "custom_id must be a string".to_string();
            return Err(refuse(None, "invalid_request", Some("custom_id"), message));
        }
        None => return Err(missing(line, None, "custom_id")),
    };
    let id = Some(custom_id.as_str());
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "method" | "url" | "body"))
    {
        let message =
            format!("unknown field `{unknown}`: a line has custom_id, method, url and body");
        return Err(refuse(id, "invalid_request", None, message));
    }
    match fields.remove("method") {
        Some(Value::String(m)) if m == "POST" => {}
        Some(other) => {
            let message = format!("method must be \"POST\", not {other}");
            return Err(refuse(id, "invalid_method", Some("method"), message));
        }
        None => return Err(missing(line, id, "method")),
    }
    let url = match fields.remove("url") {
        Some(Value::String(url)) if url.starts_with('/') && url.parse::<Uri>().is_ok() => url,
        Some(other) => {
            let message =
                format!("url must be a path such as \"/v1/chat/completions\", not {other}");
            return Err(refuse(id, "invalid_url", Some("url"), message));
        }
        None => return Err(missing(line, id, "url")),
    };
    let mut body = match fields.remove("body") {
        Some(Value::Object(body)) => body,
        Some(_) => {
            let message = "body must be a JSON object (the request)".to_string();
            return Err(refuse(id, "invalid_request", Some("body"), message));
        }
        None => return Err(missing(line, id, "body")),
    };
    if body.get("stream") == Some(&Value::Bool(true)) {
        let message =
            "`stream: true` is not supported in a batch: results are whole answers".to_string();
        return Err(refuse(id, "invalid_request", Some("body.stream"), message));
    }
    if let Some(model) = model {
        body.insert("model".to_string(), Value::String(model.to_string()));
    }
    Ok(BatchRequest {
        custom_id,
        url,
        body: serialize(body),
    })
}

fn missing(line: usize, custom_id: Option<&str>, field: &'static str) -> Refusal {
    Refusal {
        line,
        custom_id: custom_id.map(str::to_string),
        code: "missing_required_parameter",
        message: format!("the line has no `{field}`"),
        param: Some(field),
    }
}

fn serialize(body: Map<String, Value>) -> Vec<u8> {
    // A map of JSON values always serializes.
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

/// Reads `path` line by line (never the whole file at once), sending each line's fate down
/// `items`; the channel's bound keeps the reader just ahead of the requests in flight.
pub fn read_batch(
    path: &Path,
    mut classifier: Classifier,
    items: Sender<Item>,
) -> anyhow::Result<()> {
    let mut lines = Lines::open(path)?;
    while let Some((number, raw)) = lines.next_line()? {
        if items
            .blocking_send(classifier.classify(number, raw))
            .is_err()
        {
            break; // the run stopped
        }
    }
    Ok(())
}

/// Non-blank lines of `path`: the progress bar's total.
pub fn count_lines(path: &Path) -> anyhow::Result<u64> {
    let mut lines = Lines::open(path)?;
    let mut count = 0;
    while lines.next_line()?.is_some() {
        count += 1;
    }
    Ok(count)
}

/// Non-blank lines with their 1-based numbers, as bytes (a line of bad UTF-8 is a bad line,
/// not a failed run).
struct Lines {
    reader: BufReader<File>,
    buf: Vec<u8>,
    number: usize,
    name: String,
}

impl Lines {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let name = path.display().to_string();
        let file = File::open(path).with_context(|| format!("opening {name}"))?;
        Ok(Self {
            reader: BufReader::new(file),
            buf: Vec::new(),
            number: 0,
            name,
        })
    }

    fn next_line(&mut self) -> anyhow::Result<Option<(usize, &[u8])>> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.buf)
                .with_context(|| format!("reading {}", self.name))?;
            if n == 0 {
                return Ok(None);
            }
            self.number += 1;
            if !self.buf.trim_ascii().is_empty() {
                return Ok(Some((self.number, self.buf.trim_ascii())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(raw: &str) -> (&'static str, Option<String>, Option<&'static str>) {
        let r = parse_line(7, raw.as_bytes(), None).unwrap_err();
        assert_eq!(r.line, 7);
        (r.code, r.custom_id, r.param)
    }

    #[test]
    fn a_valid_line_becomes_a_request_with_its_body() {
        let raw = r#"{"custom_id": "a", "method": "POST", "url": "/v1/completions",
            "body": {"prompt": "hi", "max_tokens": 3, "stream": false}}"#;
        let r = parse_line(1, raw.as_bytes(), None).unwrap();
        assert_eq!(
            (r.custom_id.as_str(), r.url.as_str()),
            ("a", "/v1/completions")
        );
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["prompt"], "hi");
        assert_eq!(body["max_tokens"], 3);
        assert!(body.get("model").is_none());
    }

    #[test]
    fn model_replaces_the_bodys_model_or_adds_it() {
        for raw in [
            r#"{"custom_id": "a", "method": "POST", "url": "/v1/completions",
                "body": {"model": "gpt-4o-mini", "prompt": "hi"}}"#,
            r#"{"custom_id": "a", "method": "POST", "url": "/v1/completions",
                "body": {"prompt": "hi"}}"#,
        ] {
            let r = parse_line(1, raw.as_bytes(), Some("smollm2")).unwrap();
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(
                (&body["model"], &body["prompt"]),
                (&"smollm2".into(), &"hi".into())
            );
        }
    }

    #[test]
    fn bad_lines_are_refused_with_a_code_and_the_custom_id_when_known() {
        assert_eq!(code("{not json"), ("invalid_json_line", None, None));
        assert_eq!(code("[1]"), ("invalid_request", None, None));
        let no_id = r#"{"method": "POST", "url": "/v1/completions", "body": {}}"#;
        assert_eq!(
            code(no_id),
            ("missing_required_parameter", None, Some("custom_id"))
        );
        let a = Some("a".to_string());
        let no_url = r#"{"custom_id": "a", "method": "POST", "body": {}}"#;
        assert_eq!(
            code(no_url),
            ("missing_required_parameter", a.clone(), Some("url"))
        );
        let get = r#"{"custom_id": "a", "method": "GET", "url": "/v1/models", "body": {}}"#;
        assert_eq!(code(get), ("invalid_method", a.clone(), Some("method")));
        let host = r#"{"custom_id": "a", "method": "POST", "url": "http://x/v1", "body": {}}"#;
        assert_eq!(code(host), ("invalid_url", a.clone(), Some("url")));
        let stream = r#"{"custom_id": "a", "method": "POST", "url": "/v1/completions",
            "body": {"prompt": "x", "stream": true}}"#;
        assert_eq!(
            code(stream),
            ("invalid_request", a.clone(), Some("body.stream"))
        );
        let extra = r#"{"custom_id": "a", "method": "POST", "url": "/v1/completions",
            "body": {}, "priority": 1}"#;
        assert_eq!(code(extra), ("invalid_request", a, None));
    }

    #[test]
    fn done_lines_are_skipped_and_a_repeated_custom_id_is_refused_once_without_it() {
        let line = |id: &str| {
            format!(
                r#"{{"custom_id": "{id}", "method": "POST", "url": "/v1/completions", "body": {{}}}}"#
            )
        };
        let mut done = Done::default();
        done.custom_ids.insert("b".into());
        done.lines.insert(9);
        let mut c = Classifier::new(done, None);
        assert!(matches!(c.classify(1, line("a").as_bytes()), Item::Send(_)));
        assert!(matches!(c.classify(2, line("b").as_bytes()), Item::Skip));
        match c.classify(3, line("a").as_bytes()) {
            Item::Refuse(r) => assert_eq!((r.code, r.custom_id), ("duplicate_custom_id", None)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(c.classify(9, b"{bad"), Item::Skip));
        assert!(matches!(c.classify(10, b"{bad"), Item::Refuse(_)));
    }
}
