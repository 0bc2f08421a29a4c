//! Sending one streaming request and timing its chunks.
//!
//! TTFT is the time to the first chunk that carries tokens; ITLs are the gaps between
//! consecutive such chunks (a chunk with several tokens gives one gap, as in vLLM's benchmark).
//! A chunk carries tokens when it has a choice with text (completions) or content (chat), or,
//! for completions, a choice that is not the closing one (special tokens stream as empty text).
//! Role-only and finish-only chunks and the usage chunk carry none.

use std::time::Instant;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::client::HttpClient;
use crate::config::Endpoint;
use crate::record::{Outcome, RequestRecord};
use crate::session::{Prompt, RequestSpec};
use crate::sse::SseParser;

/// Fields every request of a run shares.
#[derive(Debug, Clone)]
pub struct RequestOptions {
    pub model: String,
    pub endpoint: Endpoint,
    pub ignore_eos: bool,
    pub temperature: f32,
}

pub fn body(spec: &RequestSpec, opts: &RequestOptions) -> Value {
    let mut body = json!({
        "model": opts.model,
        "max_tokens": spec.max_tokens,
        "temperature": opts.temperature,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    match &spec.prompt {
        Prompt::Text(t) => body["prompt"] = json!(t),
        Prompt::Messages(m) => body["messages"] = json!(m),
    }
    if opts.ignore_eos {
        body["ignore_eos"] = json!(true);
    }
    body
}

/// What the chunks of one stream added up to.
#[derive(Debug, Default)]
struct StreamTally {
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    itls: Vec<f64>,
    token_chunks: usize,
    text: String,
    finished: bool,
    usage: Option<(usize, usize, Option<usize>)>,
    error: Option<String>,
}

impl StreamTally {
    fn on_event(&mut self, data: &str, at: Instant, endpoint: Endpoint) {
        if data.trim() == "[DONE]" {
            self.finished = true;
            return;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            self.error = Some(format!("unparsable chunk: {}", truncate(data)));
            return;
        };
        if let Some(err) = chunk.get("error") {
            self.error = Some(format!(
                "error in the stream: {}",
                truncate(&err.to_string())
            ));
            return;
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).map(|v| v as usize);
            let cached = u
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64)
                .map(|v| v as usize);
            if let (Some(p), Some(c)) = (n("prompt_tokens"), n("completion_tokens")) {
                self.usage = Some((p, c, cached));
            }
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let finish = choice.get("finish_reason").is_some_and(|f| !f.is_null());
        self.finished |= finish;
        let (text, carries) = match endpoint {
            Endpoint::Completions => {
                let t = choice.get("text").and_then(Value::as_str).unwrap_or("");
                (t.to_string(), !t.is_empty() || !finish)
            }
            Endpoint::Chat => {
                let delta = choice.get("delta");
                let field = |k: &str| delta.and_then(|d| d.get(k)).and_then(Value::as_str);
                let content = field("content").unwrap_or("");
                let reasoning = field("reasoning_content").unwrap_or("");
                let tools = delta.is_some_and(|d| d.get("tool_calls").is_some());
                (
                    content.to_string(),
                    !content.is_empty() || !reasoning.is_empty() || tools,
                )
            }
        };
        self.text.push_str(&text);
        if !carries {
            return;
        }
        self.token_chunks += 1;
        match self.last_token {
            None => self.first_token = Some(at),
            Some(prev) => self.itls.push((at - prev).as_secs_f64()),
        }
        self.last_token = Some(at);
    }
}

fn truncate(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// Sends `spec` and records its timings; `run_start` is the origin of `sent_at`.
pub async fn send(
    client: &HttpClient,
    spec: &RequestSpec,
    opts: &RequestOptions,
    run_start: Instant,
) -> RequestRecord {
    let body = body(spec, opts);
    let start = Instant::now();
    let mut tally = StreamTally::default();
    let outcome = match stream(client, &body, opts.endpoint, &mut tally).await {
        Err(e) => Outcome::Failed(e),
        Ok(()) if tally.error.is_some() => Outcome::Failed(tally.error.take().unwrap_or_default()),
        Ok(()) if tally.first_token.is_none() => {
            Outcome::Failed("the stream ended without a token".into())
        }
        Ok(()) if !tally.finished => {
            Outcome::Failed("the stream ended before the answer did".into())
        }
        Ok(()) => Outcome::Success,
    };
    let end = Instant::now();
    let (prompt_tokens, output_tokens, cached) = match tally.usage {
        Some(u) => u,
        None => (spec.estimated_prompt_tokens, tally.token_chunks, None),
    };
    RequestRecord {
        session: spec.session,
        turn: spec.turn,
        sent_at: (start - run_start).as_secs_f64(),
        outcome,
        ttft: tally.first_token.map(|t| (t - start).as_secs_f64()),
        itls: tally.itls,
        e2e: (end - start).as_secs_f64(),
        prompt_tokens,
        output_tokens,
        token_chunks: tally.token_chunks,
        usage_reported: tally.usage.is_some(),
        cached_tokens: cached,
        text: tally.text,
    }
}

async fn stream(
    client: &HttpClient,
    body: &Value,
    endpoint: Endpoint,
    tally: &mut StreamTally,
) -> Result<(), String> {
    let resp = client
        .post_json(endpoint.path(), body)
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let mut body = resp.into_body();
    if !status.is_success() {
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(format!(
            "HTTP {}: {}",
            status.as_u16(),
            truncate(&String::from_utf8_lossy(&bytes))
        ));
    }
    let mut parser = SseParser::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the stream broke: {e}"))?;
        let at = Instant::now();
        if let Some(data) = frame.data_ref() {
            for event in parser.push(data) {
                tally.on_event(&event, at, endpoint);
            }
        }
    }
    if let Some(event) = parser.finish() {
        tally.on_event(&event, Instant::now(), endpoint);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn feed(endpoint: Endpoint, events: &[&str]) -> StreamTally {
        let t0 = Instant::now();
        let mut t = StreamTally::default();
        for (i, e) in events.iter().enumerate() {
            t.on_event(e, t0 + Duration::from_millis(10 * i as u64), endpoint);
        }
        t
    }

    #[test]
    fn completion_chunks_with_text_or_still_open_carry_tokens() {
        let t = feed(
            Endpoint::Completions,
            &[
                r#"{"choices":[{"text":"a","finish_reason":null}]}"#,
                r#"{"choices":[{"text":"","finish_reason":null}]}"#,
                r#"{"choices":[{"text":"c","finish_reason":null}]}"#,
                r#"{"choices":[{"text":"","finish_reason":"length"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#,
                "[DONE]",
            ],
        );
        assert_eq!(t.token_chunks, 3);
        assert_eq!(t.itls, vec![0.01, 0.01]);
        assert_eq!(t.text, "ac");
        assert_eq!(t.usage, Some((7, 3, Some(4))));
        assert!(t.finished && t.error.is_none());
    }

    #[test]
    fn chat_role_and_finish_chunks_carry_no_tokens() {
        let t = feed(
            Endpoint::Chat,
            &[
                r#"{"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                r#"{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}"#,
                r#"{"choices":[{"delta":{"content":" there"},"finish_reason":null}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            ],
        );
        assert_eq!(t.token_chunks, 2);
        assert_eq!(t.itls.len(), 1);
        assert_eq!(t.text, "Hi there");
        assert!(t.finished && t.usage.is_none());
    }

    #[test]
    fn errors_in_the_stream_are_kept() {
        let t = feed(Endpoint::Chat, &[r#"{"error":{"message":"oops"}}"#]);
        assert!(t.error.unwrap().contains("oops"));
        let t = feed(Endpoint::Chat, &["not json"]);
        assert!(t.error.is_some());
    }
}
