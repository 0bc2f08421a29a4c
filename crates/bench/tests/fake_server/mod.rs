//! An OpenAI-compatible server with known timings: each request's first token comes a fixed
//! TTFT after the request arrived, the next ones a fixed gap apart (scheduled from the arrival,
//! so delays do not accumulate), and the closing chunk one more gap later. It reports fixed
//! usage, and its `/metrics` prefix-cache counters grow by known amounts per request.
//!
//! Traps for a wrong client: chat streams open with a role-only chunk sent at once, the
//! finish comes in a chunk of its own without text, and usage comes in a chunk without choices.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::stream;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

#[derive(Debug, Clone)]
pub struct Timings {
    pub ttft: Duration,
    /// Every odd-numbered request (in arrival order) waits this long for its first token instead.
    pub slow_ttft: Option<Duration>,
    pub itl: Duration,
    /// What `usage` reports for every request.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

/// Counter values before any request: a client must report the change, not the totals.
pub const BASE_HITS: u64 = 1000;
pub const BASE_QUERIES: u64 = 4000;

struct Shared {
    timings: Timings,
    arrivals: AtomicUsize,
    hits: AtomicU64,
    queries: AtomicU64,
    /// Every request body, in arrival order.
    bodies: Mutex<Vec<Value>>,
}

pub struct FakeServer {
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeServer {
    pub fn bodies(&self) -> Vec<Value> {
        self.shared.bodies.lock().unwrap().clone()
    }
    pub fn requests_seen(&self) -> usize {
        self.shared.arrivals.load(Ordering::SeqCst)
    }
}

pub async fn start(timings: Timings) -> FakeServer {
    let shared = Arc::new(Shared {
        timings,
        arrivals: AtomicUsize::new(0),
        hits: AtomicU64::new(BASE_HITS),
        queries: AtomicU64::new(BASE_QUERIES),
        bodies: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/v1/completions", post(|s, b| generate(s, b, false)))
        .route("/v1/chat/completions", post(|s, b| generate(s, b, true)))
        .with_state(Arc::clone(&shared));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    FakeServer { url, shared }
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "test-model", "object": "model"}]}))
}

async fn metrics(State(s): State<Arc<Shared>>) -> String {
    format!(
        "# TYPE ferrite:prefix_cache_queries_total counter\n\
         ferrite:prefix_cache_queries_total{{model_name=\"test-model\"}} {}\n\
         # TYPE ferrite:prefix_cache_hits_total counter\n\
         ferrite:prefix_cache_hits_total{{model_name=\"test-model\"}} {}\n",
        s.queries.load(Ordering::SeqCst),
        s.hits.load(Ordering::SeqCst),
    )
}

async fn generate(State(s): State<Arc<Shared>>, Json(body): Json<Value>, chat: bool) -> Response {
    let arrived = Instant::now();
    let k = s.arrivals.fetch_add(1, Ordering::SeqCst);
    s.bodies.lock().unwrap().push(body.clone());
    s.queries
        .fetch_add(s.timings.prompt_tokens, Ordering::SeqCst);
    s.hits.fetch_add(s.timings.cached_tokens, Ordering::SeqCst);
    let t = s.timings.clone();
    let n = body["max_tokens"].as_u64().unwrap_or(16) as u32;
    let ttft = match t.slow_ttft {
        Some(slow) if k % 2 == 1 => slow,
        _ => t.ttft,
    };
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        let send = |v: Value| {
            let tx = tx.clone();
            async move { tx.send(Event::default().data(v.to_string())).await.is_ok() }
        };
        if chat {
            let role = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]});
            if !send(role).await {
                return;
            }
        }
        for i in 0..n {
            sleep_until(arrived + ttft + t.itl * i).await;
            let text = format!(" r{k}t{i}");
            let choice = if chat {
                json!({"index": 0, "delta": {"content": text}, "finish_reason": null})
            } else {
                json!({"index": 0, "text": text, "finish_reason": null})
            };
            if !send(json!({"choices": [choice]})).await {
                return;
            }
        }
        sleep_until(arrived + ttft + t.itl * n).await;
        let finish = if chat {
            json!({"index": 0, "delta": {}, "finish_reason": "length"})
        } else {
            json!({"index": 0, "text": "", "finish_reason": "length"})
        };
        let usage = json!({"prompt_tokens": t.prompt_tokens, "completion_tokens": n,
            "total_tokens": t.prompt_tokens + n as u64,
            "prompt_tokens_details": {"cached_tokens": t.cached_tokens}});
        let _ = send(json!({"choices": [finish]})).await
            && send(json!({"choices": [], "usage": usage})).await
            && tx.send(Event::default().data("[DONE]")).await.is_ok();
    });
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body).into_response()
}
