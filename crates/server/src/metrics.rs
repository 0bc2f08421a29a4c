//! `/metrics` in the Prometheus text format, with vLLM's names under the `ferrite:` prefix.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use ferrite_engine::EngineStats;

pub fn render(stats: &EngineStats, model_name: &str) -> String {
    let label = format!("{{model_name=\"{}\"}}", escape_label(model_name));
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name}{label} {value}");
    };
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed).to_string();
    let load64 = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
    metric(
        "ferrite:num_requests_running",
        "gauge",
        "Requests in the running batch.",
        load(&stats.num_running),
    );
    metric(
        "ferrite:num_requests_waiting",
        "gauge",
        "Requests waiting to be scheduled.",
        load(&stats.num_waiting),
    );
    metric(
        "ferrite:kv_cache_usage_perc",
        "gauge",
        "Fraction of KV cache pages in use by live requests (1 = full).",
        stats.kv_cache_usage().to_string(),
    );
    metric(
        "ferrite:prompt_tokens_total",
        "counter",
        "Prompt tokens processed.",
        load64(&stats.prompt_tokens_total),
    );
    metric(
        "ferrite:generation_tokens_total",
        "counter",
        "Tokens generated.",
        load64(&stats.generation_tokens_total),
    );
    metric(
        "ferrite:prefix_cache_queries_total",
        "counter",
        "Prompt tokens looked up in the prefix cache.",
        load64(&stats.prefix_cache_queries_total),
    );
    metric(
        "ferrite:prefix_cache_hits_total",
        "counter",
        "Prompt tokens found in the prefix cache.",
        load64(&stats.prefix_cache_hits_total),
    );
    metric(
        "ferrite:num_preemptions_total",
        "counter",
        "Requests preempted (their KV freed and recomputed later).",
        load64(&stats.num_preemptions_total),
    );
    out
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_and_counters_are_labelled_prometheus_lines() {
        let stats = EngineStats::default();
        stats.num_running.store(3, Ordering::Relaxed);
        stats.kv_pages_total.store(4, Ordering::Relaxed);
        stats.kv_pages_used.store(1, Ordering::Relaxed);
        stats.prefix_cache_hits_total.store(992, Ordering::Relaxed);
        let text = render(&stats, "m\"x");
        assert!(
            text.contains("ferrite:num_requests_running{model_name=\"m\\\"x\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("ferrite:kv_cache_usage_perc{model_name=\"m\\\"x\"} 0.25\n"));
        assert!(text.contains("ferrite:prefix_cache_hits_total{model_name=\"m\\\"x\"} 992\n"));
        assert!(text.contains("# TYPE ferrite:num_preemptions_total counter"));
    }
}
