//! `ferrite bench` against a real `ferrite serve`, and `ferrite bench-model`, run as the binary.
//!
//! Oracles: what was asked. With `ignore_eos` every answer has exactly the asked length; the
//! prompt words are one token each for SmolLM2 (tests/bench_prompt_words.rs), so the server's
//! usage must count exactly the asked prompt length; a shared prefix must show up in the
//! server's prefix-cache counters and nowhere else.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const FERRITE: &str = env!("CARGO_BIN_EXE_ferrite");

fn model() -> PathBuf {
    let dir = match std::env::var_os("FERRITE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/ferrite/models"),
    };
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch_models.sh",
        path.display()
    );
    path
}

/// A `ferrite serve` on a free port, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(FERRITE)
            .arg("serve")
            .arg(model())
            .args(["--port", &port.to_string(), "--kv-cache-memory", "256MiB"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        // The port answers while the model loads (503); /health is 200 once it is loaded.
        while !healthy(port) {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    fn bench(&self, args: &[&str]) -> Value {
        let out = Command::new(FERRITE)
            .args(["bench", "--url", &self.url, "--json", "--no-progress"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ferrite bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let mut answer = String::new();
    stream
        .write_all(b"GET /health HTTP/1.0\r\n\r\n")
        .and_then(|()| stream.read_to_string(&mut answer))
        .is_ok()
        && answer.split_whitespace().nth(1) == Some("200")
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bench_counts_exactly_what_it_asked_a_real_server_for() {
    let server = Server::start();
    let r = server.bench(&[
        "--num-requests",
        "6",
        "--max-concurrency",
        "3",
        "--input-len",
        "40",
        "--output-len",
        "12",
        "--seed",
        "101",
    ]);
    assert_eq!(r["completed"], 6);
    assert_eq!(r["failed"], 0);
    assert_eq!(r["token_counts_from_usage"], true);
    assert_eq!(r["total_input_tokens"], 6 * 40);
    assert_eq!(r["total_output_tokens"], 6 * 12);
    assert_eq!(r["itl_ms"]["count"], 6 * 11);
    assert_eq!(r["info"]["model"], "SmolLM2-135M-Instruct.Q4_1");
    // Unique prompts: nothing to reuse.
    assert_eq!(r["server_prefix_cache"]["hits"], 0.0);
    assert_eq!(r["server_prefix_cache"]["queries"], 240.0);

    // Four prompts of a 64-token shared prefix and 8 unique tokens, one at a time: the last
    // three find the prefix's full pages (64 tokens = 4 pages of 16) in the cache.
    let r = server.bench(&[
        "--num-requests",
        "4",
        "--max-concurrency",
        "1",
        "--prefix-len",
        "64",
        "--input-len",
        "8",
        "--output-len",
        "2",
        "--seed",
        "102",
    ]);
    assert_eq!(r["total_input_tokens"], 4 * 72);
    assert_eq!(r["server_prefix_cache"]["hits"], 3.0 * 64.0);
    assert_eq!(r["usage_cached_fraction"], 3.0 * 64.0 / (4.0 * 72.0));
}

#[test]
fn bench_model_reports_every_test_with_its_repetitions() {
    let out = Command::new(FERRITE)
        .arg("bench-model")
        .arg(model())
        .args([
            "--prompt-len",
            "32",
            "--gen-len",
            "8",
            "--repetitions",
            "2",
            "--batch",
            "3",
            "--json",
            "--kv-cache-memory",
            "256MiB",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = r["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|t| t["test"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pp32", "tg8", "pp32+tg8 x3"]);
    for t in results {
        let samples: Vec<f64> = t["samples_ts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(samples.len(), 2);
        assert!(samples.iter().all(|s| s.is_finite() && *s > 0.0), "{t}");
        let mean = (samples[0] + samples[1]) / 2.0;
        assert!((t["avg_ts"].as_f64().unwrap() - mean).abs() < 1e-9 * mean);
    }
}
