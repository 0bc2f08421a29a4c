//! The exporter thread: collects spans for up to [`BATCH_WINDOW`] (at most [`MAX_BATCH`]) and
//! POSTs them as one OTLP/HTTP JSON request. A collector that is down costs a warning, never
//! a request: spans are dropped, not retried.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::otlp::{export_request, Span};

const BATCH_WINDOW: Duration = Duration::from_millis(200);
const MAX_BATCH: usize = 512;
const TIMEOUT: Duration = Duration::from_secs(10);

/// `http://host:4318` → `http://host:4318/v1/traces`; a URL with a path is used as it is.
pub fn traces_url(endpoint: &str) -> anyhow::Result<String> {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        anyhow::bail!(
            "--otlp-traces-endpoint {endpoint:?}: ferrite exports OTLP/HTTP with JSON encoding to an http:// URL (gRPC and https are not supported)"
        );
    };
    Ok(match rest.find('/') {
        Some(slash) if slash + 1 < rest.len() => endpoint.to_string(),
        _ => format!("http://{}/v1/traces", rest.trim_end_matches('/')),
    })
}

pub fn spawn(url: String, service_name: String) -> std::io::Result<Sender<Span>> {
    let (tx, rx) = channel::<Span>();
    std::thread::Builder::new()
        .name("ferrite-otlp".into())
        .spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(TIMEOUT).build();
            while let Ok(first) = rx.recv() {
                let mut batch = vec![first];
                let deadline = Instant::now() + BATCH_WINDOW;
                while batch.len() < MAX_BATCH {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(span) => batch.push(span),
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                }
                let count = batch.len();
                let body = match serde_json::to_string(&export_request(&service_name, batch)) {
                    Ok(body) => body,
                    Err(error) => {
                        tracing::error!(%error, "cannot encode spans");
                        continue;
                    }
                };
                let sent = agent
                    .post(&url)
                    .set("Content-Type", "application/json")
                    .send_string(&body);
                if let Err(error) = sent {
                    tracing::warn!(%error, count, url, "OTLP export failed; spans dropped");
                }
            }
        })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_to_a_bare_endpoint() {
        let url = |e| traces_url(e).unwrap();
        assert_eq!(url("http://otel:4318"), "http://otel:4318/v1/traces");
        assert_eq!(url("http://otel:4318/"), "http://otel:4318/v1/traces");
        assert_eq!(
            url("http://otel:4318/v1/traces"),
            "http://otel:4318/v1/traces"
        );
        assert!(traces_url("grpc://otel:4317").is_err());
        assert!(traces_url("otel:4317").is_err());
    }
}
