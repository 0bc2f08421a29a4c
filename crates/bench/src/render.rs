//! The human-readable report: a key/value block and a latency table.

use std::fmt::Write;

use crate::config::Slo;
use crate::report::BenchReport;
use crate::stats::Summary;

const RULE: &str = "----------------------------------------------------------------------------";

pub fn render(r: &BenchReport) -> String {
    let mut out = String::new();
    let i = &r.info;
    let mut row = |label: &str, value: String| {
        let _ = writeln!(out, "{label:<36} {value}");
    };
    row("Server", format!("{} ({})", i.url, i.endpoint.path()));
    row("Model", i.model.clone());
    row("Workload", i.workload.clone());
    row(
        "Load",
        format!(
            "{} requests, {}, {}, seed {}{}",
            i.num_requests,
            i.request_rate
                .map_or("all at once".to_string(), |q| format!("Poisson {q} req/s")),
            i.max_concurrency
                .map_or("no concurrency limit".to_string(), |c| format!(
                    "concurrency {c}"
                )),
            i.seed,
            if i.ignore_eos { ", ignore_eos" } else { "" },
        ),
    );
    row("Prompt sizing", i.token_counter.clone());
    let _ = writeln!(out, "{RULE}");
    let mut row = |label: &str, value: String| {
        let _ = writeln!(out, "{label:<36} {value:>12}");
    };
    row("Completed requests", r.completed.to_string());
    row("Failed requests", r.failed.to_string());
    if r.cancelled > 0 || r.not_sent > 0 {
        row("Cancelled at the time limit", r.cancelled.to_string());
        row("Not sent", r.not_sent.to_string());
    }
    row("Duration (s)", format!("{:.2}", r.duration_s));
    let source = if r.token_counts_from_usage {
        "usage"
    } else {
        "estimated"
    };
    row(
        &format!("Total input tokens ({source})"),
        r.total_input_tokens.to_string(),
    );
    row(
        &format!("Total output tokens ({source})"),
        r.total_output_tokens.to_string(),
    );
    row(
        "Request throughput (req/s)",
        format!("{:.2}", r.request_throughput),
    );
    row(
        "Input token throughput (tok/s)",
        format!("{:.2}", r.input_token_throughput),
    );
    row(
        "Output token throughput (tok/s)",
        format!("{:.2}", r.output_token_throughput),
    );
    row(
        "Total token throughput (tok/s)",
        format!("{:.2}", r.total_token_throughput),
    );
    if let (Some(slo), Some(goodput), Some(met)) = (&r.slo, r.goodput, r.slo_met) {
        row(
            &format!("Requests meeting [{}]", describe_slo(slo)),
            format!("{met}/{}", r.completed),
        );
        row("Goodput (req/s)", format!("{goodput:.2}"));
    }
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    row(
        "Prefix cache hit rate (server)",
        match &r.server_prefix_cache {
            None => "n/a".into(),
            Some(d) => d.hit_rate.map_or("n/a (no lookups)".into(), pct),
        },
    );
    row(
        "Cached prompt tokens (usage)",
        r.usage_cached_fraction.map_or("n/a".into(), pct),
    );
    let _ = writeln!(out, "{RULE}");
    let _ = writeln!(
        out,
        "{:<14}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "Latency (ms)", "mean", "p50", "p90", "p99", "max", "samples"
    );
    for (name, s) in [
        ("TTFT", &r.ttft_ms),
        ("ITL", &r.itl_ms),
        ("TPOT", &r.tpot_ms),
        ("E2E", &r.e2e_ms),
    ] {
        let _ = writeln!(out, "{}", latency_row(name, s.as_ref()));
    }
    if let Some(why) = &r.stopped_early {
        let _ = writeln!(out, "{RULE}\nStopped early: {why}");
    }
    if !r.errors.is_empty() {
        let _ = writeln!(out, "{RULE}\nErrors:");
        for e in &r.errors {
            let _ = writeln!(out, "  {e}");
        }
    }
    out
}

fn latency_row(name: &str, s: Option<&Summary>) -> String {
    match s {
        None => format!("{name:<14}{:>10}", "n/a"),
        Some(s) => format!(
            "{name:<14}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10}",
            s.mean, s.p50, s.p90, s.p99, s.max, s.count
        ),
    }
}

pub fn describe_slo(slo: &Slo) -> String {
    [
        ("ttft", slo.ttft_ms),
        ("itl", slo.itl_ms),
        ("tpot", slo.tpot_ms),
        ("e2e", slo.e2e_ms),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k}<={v}ms")))
    .collect::<Vec<_>>()
    .join(",")
}
