//! The load generator against a server whose timings, token counts and cache counters are
//! known: the report must find them again.
//!
//! Timers only ever fire late, so measured latencies are bounded below by the configured ones
//! exactly and above with room for a busy machine; the other checks are exact.

mod fake_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_server::{FakeServer, Timings};
use ferrite_bench::arrival::Arrivals;
use ferrite_bench::{BenchConfig, BenchReport, Endpoint, LenRange, WordCounter, WorkloadKind};

const MS: f64 = 1e-3;

fn timings(ttft_ms: u64, itl_ms: u64) -> Timings {
    Timings {
        ttft: Duration::from_millis(ttft_ms),
        slow_ttft: None,
        itl: Duration::from_millis(itl_ms),
        prompt_tokens: 100,
        cached_tokens: 25,
    }
}

fn config(server: &FakeServer, requests: usize, output: usize) -> BenchConfig {
    let mut c = BenchConfig::new(&server.url);
    c.workload = WorkloadKind::Random;
    c.lengths.input_len = Some(LenRange::fixed(50));
    c.lengths.output_len = Some(LenRange::fixed(output));
    c.num_requests = requests;
    c
}

async fn run(c: &BenchConfig) -> BenchReport {
    ferrite_bench::run(c, Arc::new(WordCounter)).await.unwrap()
}

fn within(what: &str, value: f64, lo: f64, hi: f64) {
    assert!(
        (lo..=hi).contains(&value),
        "{what} = {value}, expected in [{lo}, {hi}]"
    );
}

/// 16 requests of 16 tokens, 4 at a time: TTFT 100 ms, 20 ms between tokens, the closing chunk
/// 20 ms after the last token, so each request takes 100 + 16 × 20 = 420 ms and the run four
/// waves of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latencies_throughput_and_cache_reuse_match_the_server() {
    let server = fake_server::start(timings(100, 20)).await;
    let mut c = config(&server, 16, 16);
    c.max_concurrency = Some(4);
    let r = run(&c).await;

    assert_eq!(
        (r.completed, r.failed, r.cancelled, r.not_sent),
        (16, 0, 0, 0)
    );
    assert_eq!(r.info.model, "test-model");
    assert!(r.token_counts_from_usage);
    assert_eq!((r.total_input_tokens, r.total_output_tokens), (1600, 256));

    let ttft = r.ttft_ms.unwrap();
    within("TTFT min", ttft.min, 100.0, 130.0);
    within("TTFT mean", ttft.mean, 100.0, 115.0);
    within("TTFT p99", ttft.p99, 100.0, 150.0);
    // The finish and usage chunks carry no token: 15 gaps per request.
    let itl = r.itl_ms.unwrap();
    assert_eq!(itl.count, 16 * 15);
    within("ITL p50", itl.p50, 18.0, 23.0);
    within("ITL mean", itl.mean, 19.0, 22.0);
    // (e2e − ttft) / 15 = 16 × 20 / 15 = 21.33 (a late first token shortens it a little; the
    // wrong divisor 16 would give 20).
    within("TPOT mean", r.tpot_ms.unwrap().mean, 20.7, 23.5);
    within("E2E mean", r.e2e_ms.unwrap().mean, 420.0, 450.0);

    let expected_duration = 4.0 * 420.0 * MS;
    within(
        "duration",
        r.duration_s,
        expected_duration,
        expected_duration * 1.15,
    );
    let expected_rate = 256.0 / expected_duration;
    within(
        "output tok/s",
        r.output_token_throughput,
        expected_rate / 1.15,
        expected_rate * 1.001,
    );
    within(
        "req/s",
        r.request_throughput,
        16.0 / expected_duration / 1.15,
        16.0 / expected_duration * 1.001,
    );

    // Exactly the run's share of the counters: 16 × 25 hits over 16 × 100 lookups.
    let cache = r.server_prefix_cache.clone().unwrap();
    assert_eq!(
        (cache.hits, cache.queries, cache.hit_rate),
        (400.0, 1600.0, Some(0.25))
    );
    assert_eq!(r.usage_cached_fraction, Some(0.25));

    // Never more than 4 requests in flight.
    let mut edges: Vec<(f64, i32)> = r
        .requests
        .iter()
        .flat_map(|q| [(q.sent_at, 1), (q.sent_at + q.e2e, -1)])
        .collect();
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut open = 0;
    for (_, d) in edges {
        open += d;
        assert!(open <= 4, "{open} requests in flight");
    }

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 16);
    for b in &bodies {
        assert_eq!(b["model"], "test-model");
        assert_eq!(b["max_tokens"], 16);
        assert_eq!(b["stream"], true);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["prompt"].as_str().unwrap().split_whitespace().count(), 50);
    }
    let text = ferrite_bench::render(&r);
    assert!(text.contains("25.0%"), "{text}");
}

/// Odd requests wait 300 ms for their first token, even ones 100 ms: an SLO of 200 ms keeps
/// exactly half. The chat stream opens with a role-only chunk at once, which is no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodput_counts_the_requests_that_meet_the_slo() {
    let mut t = timings(100, 10);
    t.slow_ttft = Some(Duration::from_millis(300));
    let server = fake_server::start(t).await;
    let mut c = config(&server, 8, 4);
    c.endpoint = Endpoint::Chat;
    c.slo = Some("ttft=200".parse().unwrap());
    let r = run(&c).await;

    assert_eq!(r.completed, 8);
    assert_eq!(r.slo_met, Some(4));
    let goodput = r.goodput.unwrap();
    assert!((goodput - r.request_throughput / 2.0).abs() < 1e-9);
    let ttft = r.ttft_ms.unwrap();
    within("TTFT min", ttft.min, 100.0, 130.0);
    within("TTFT max", ttft.max, 300.0, 345.0);
    assert_eq!(r.itl_ms.unwrap().count, 8 * 3);
    for b in server.bodies() {
        assert_eq!(b["messages"][0]["role"], "user");
    }
}

/// With `--request-rate`, the n-th request leaves at the n-th arrival of the seeded Poisson
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisson_arrivals_follow_the_seeded_schedule() {
    let server = fake_server::start(timings(5, 1)).await;
    let mut c = config(&server, 20, 2);
    c.request_rate = Some(20.0);
    c.seed = 11;
    let r = run(&c).await;
    assert_eq!(r.completed, 20);

    let mut arrivals = Arrivals::new(Some(20.0), 11);
    let mut due = 0.0;
    let mut sent: Vec<(usize, f64)> = r.requests.iter().map(|q| (q.session, q.sent_at)).collect();
    sent.sort_by_key(|s| s.0);
    for (i, (_, at)) in sent.into_iter().enumerate() {
        within(&format!("request {i} sent at"), at, due, due + 0.025);
        due += arrivals.next_gap();
    }
}

/// Requests of 5 s each against a 0.5 s limit: the two in flight are cancelled, the rest never
/// sent, and the run ends on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_limit_cancels_what_is_outstanding() {
    let server = fake_server::start(timings(100, 100)).await;
    let mut c = config(&server, 10, 50);
    c.max_concurrency = Some(2);
    c.max_duration = Duration::from_millis(500);
    let started = Instant::now();
    let r = run(&c).await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!((r.completed, r.cancelled, r.not_sent), (0, 2, 8));
    assert!(r.stopped_early.unwrap().contains("--max-duration"));
    assert_eq!(server.requests_seen(), 2);
}

/// A conversation's next turn includes the answer the server streamed to the previous one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_carry_their_answers_into_the_next_turn() {
    let server = fake_server::start(timings(5, 1)).await;
    let mut c = config(&server, 6, 3);
    c.workload = WorkloadKind::Chatbot;
    c.endpoint = Endpoint::Chat;
    c.lengths.prefix_len = Some(20);
    c.lengths.turns = Some(3);
    let r = run(&c).await;
    assert_eq!(r.completed, 6);

    let bodies = server.bodies();
    let answer = |k: usize| (0..3).map(|i| format!(" r{k}t{i}")).collect::<String>();
    let system = &bodies[0]["messages"][0];
    let mut lengths = Vec::new();
    for (k, b) in bodies.iter().enumerate() {
        let m = b["messages"].as_array().unwrap();
        assert_eq!(&m[0], system);
        lengths.push(m.len());
        for pair in m[1..].chunks(2) {
            assert_eq!(pair[0]["role"], "user");
            if let Some(a) = pair.get(1) {
                // The assistant's words are those of a request answered before this one.
                let text = a["content"].as_str().unwrap();
                assert!((0..k).any(|j| answer(j) == text), "unknown answer {text}");
            }
        }
    }
    lengths.sort();
    assert_eq!(lengths, [2, 2, 4, 4, 6, 6]);
}
