use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferrite_engine::{EngineStats, ExpertLoad, FinishReason, StepStats};

use super::*;
use crate::observe::finished_request::FinishedRequest;
use crate::testing::{metrics_config as config, parse_line, sample, test_metrics};

/// `(name, type)` of every `# TYPE` line.
fn types(text: &str) -> BTreeSet<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

/// The issue's list of series, with vLLM's types, by name without prefix.
const VLLM_SERIES: &[(&str, &str)] = &[
    ("num_requests_running", "gauge"),
    ("num_requests_waiting", "gauge"),
    ("kv_cache_usage_perc", "gauge"),
    ("cache_config_info", "gauge"),
    ("prompt_tokens_total", "counter"),
    ("generation_tokens_total", "counter"),
    ("prefix_cache_queries_total", "counter"),
    ("prefix_cache_hits_total", "counter"),
    ("num_preemptions_total", "counter"),
    ("request_success_total", "counter"),
    ("time_to_first_token_seconds", "histogram"),
    ("inter_token_latency_seconds", "histogram"),
    ("e2e_request_latency_seconds", "histogram"),
    ("request_queue_time_seconds", "histogram"),
    ("request_prefill_time_seconds", "histogram"),
    ("request_decode_time_seconds", "histogram"),
    ("request_inference_time_seconds", "histogram"),
    ("request_prompt_tokens", "histogram"),
    ("request_generation_tokens", "histogram"),
    ("iteration_tokens_total", "histogram"),
];

/// Exported only under vLLM's names, for endpoint pickers built against older vLLM.
const VLLM_COMPATIBILITY: &[(&str, &str)] = &[
    ("gpu_cache_usage_perc", "gauge"),
    ("lora_requests_info", "gauge"),
];

fn expected_types(prefix: &str) -> BTreeSet<(String, String)> {
    let compatibility = if prefix == "vllm:" {
        VLLM_COMPATIBILITY
    } else {
        &[]
    };
    VLLM_SERIES
        .iter()
        .chain(compatibility)
        .map(|(n, t)| (format!("{prefix}{n}"), t.to_string()))
        .chain(
            [
                ("ferrite:scheduler_step_seconds", "histogram"),
                ("ferrite:scale_out_needed", "gauge"),
            ]
            .map(|(n, t)| (n.to_string(), t.to_string())),
        )
        .collect()
}

#[test]
fn every_series_is_exported_with_vllms_type_under_either_naming() {
    for (names, prefix) in [
        (MetricNames::Ferrite, "ferrite:"),
        (MetricNames::Vllm, "vllm:"),
    ] {
        let metrics = Metrics::new(&config(names, "m"), Arc::new(EngineStats::default()));
        let text = metrics.render().unwrap();
        assert_eq!(types(&text), expected_types(prefix), "{text}");
    }
}

#[test]
fn every_sample_carries_the_model_name_escaped() {
    let metrics = Metrics::new(
        &config(MetricNames::Ferrite, "a\"b\\c"),
        Arc::new(EngineStats::default()),
    );
    let text = metrics.render().unwrap();
    let samples: Vec<_> = text.lines().filter_map(parse_line).collect();
    assert!(samples.len() > 100);
    for (name, labels, _) in samples {
        assert_eq!(labels["model_name"], "a\"b\\c", "{name}");
    }
}

#[test]
fn engine_atomics_are_read_at_scrape_time() {
    let stats = Arc::new(EngineStats::default());
    let metrics = Metrics::new(&config(MetricNames::Vllm, "m"), Arc::clone(&stats));
    stats.num_running.store(3, Ordering::Relaxed);
    stats.num_waiting.store(2, Ordering::Relaxed);
    stats.kv_pages_total.store(8, Ordering::Relaxed);
    stats.kv_pages_used.store(2, Ordering::Relaxed);
    stats.prefix_cache_hits_total.store(992, Ordering::Relaxed);
    stats.num_preemptions_total.store(4, Ordering::Relaxed);
    let text = metrics.render().unwrap();
    let get = |s: &str| sample(&text, s);
    assert_eq!(get("vllm:num_requests_running"), Some(3.0));
    assert_eq!(get("vllm:num_requests_waiting"), Some(2.0));
    assert_eq!(get("vllm:kv_cache_usage_perc"), Some(0.25));
    assert_eq!(get("vllm:gpu_cache_usage_perc"), Some(0.25));
    let lora = get(
        r#"vllm:lora_requests_info{max_lora="0",running_lora_adapters="",waiting_lora_adapters=""}"#,
    );
    assert!(lora.is_some_and(|t| t > 1.7e9), "{text}");
    assert_eq!(get("vllm:prefix_cache_hits_total"), Some(992.0));
    assert_eq!(get("vllm:num_preemptions_total"), Some(4.0));
    assert_eq!(
        get(
            r#"vllm:cache_config_info{block_size="16",num_gpu_blocks="1000",enable_prefix_caching="False"}"#
        ),
        Some(1.0)
    );
}

fn finished(finish: FinishReason, e2e_ms: u64, generated: usize) -> FinishedRequest {
    FinishedRequest {
        id: 1,
        request_id: None,
        finish,
        num_prompt_tokens: 30,
        num_cached_tokens: 0,
        num_generation_tokens: generated,
        queue: Duration::from_millis(100),
        prefill: Duration::from_millis(200),
        decode: Duration::from_millis(e2e_ms - 300),
        time_to_first_token: Some(Duration::from_millis(300)),
        e2e: Duration::from_millis(e2e_ms),
        prompt_ids: None,
        output_ids: None,
        speculation: None,
    }
}

#[test]
fn finished_requests_land_in_vllms_buckets_and_reason_counters() {
    let metrics = test_metrics();
    metrics.observe_finished(&finished(FinishReason::Length, 400, 7));
    metrics.observe_finished(&finished(FinishReason::Length, 900, 120));
    metrics.observe_finished(&finished(FinishReason::Stop, 3000, 1));
    let text = metrics.render().unwrap();
    let get = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("{s} missing:\n{text}"));
    assert_eq!(
        get(r#"ferrite:request_success_total{finished_reason="length"}"#),
        2.0
    );
    assert_eq!(
        get(r#"ferrite:request_success_total{finished_reason="stop"}"#),
        1.0
    );
    assert_eq!(
        get(r#"ferrite:request_success_total{finished_reason="abort"}"#),
        0.0
    );
    let e2e = "ferrite:e2e_request_latency_seconds";
    assert_eq!(get(&format!("{e2e}_count")), 3.0);
    assert!((get(&format!("{e2e}_sum")) - 4.3).abs() < 1e-9);
    // Cumulative buckets: 0.4 s is the only one under 0.5 s, 0.9 s joins by 1 s.
    assert_eq!(get(&format!(r#"{e2e}_bucket{{le="0.3"}}"#)), 0.0);
    assert_eq!(get(&format!(r#"{e2e}_bucket{{le="0.5"}}"#)), 1.0);
    assert_eq!(get(&format!(r#"{e2e}_bucket{{le="1"}}"#)), 2.0);
    assert_eq!(get(&format!(r#"{e2e}_bucket{{le="+Inf"}}"#)), 3.0);
    let generated = "ferrite:request_generation_tokens";
    assert_eq!(get(&format!("{generated}_sum")), 128.0);
    assert_eq!(get(&format!(r#"{generated}_bucket{{le="10"}}"#)), 2.0);
    assert_eq!(get(&format!(r#"{generated}_bucket{{le="2000"}}"#)), 3.0);
    assert_eq!(get("ferrite:request_queue_time_seconds_count"), 3.0);
    // Running phase = prefill + decode: (0.2 + 0.1) + (0.2 + 0.6) + (0.2 + 2.7) s.
    let inference = "ferrite:request_inference_time_seconds";
    assert!((get(&format!("{inference}_sum")) - 4.0).abs() < 1e-9);
    // TTFT and ITL are observed as tokens arrive, not at the finish.
    assert_eq!(get("ferrite:time_to_first_token_seconds_count"), 0.0);
}

#[test]
fn steps_split_their_time_by_phase_and_count_their_tokens() {
    let metrics = test_metrics();
    let step = StepStats {
        schedule: Duration::from_micros(40),
        draft: Duration::ZERO,
        forward: Duration::from_millis(30),
        sample: Duration::from_micros(300),
        num_tokens: 100,
        num_seqs: 3,
    };
    metrics.observe_step(&step);
    metrics.observe_step(&StepStats {
        num_tokens: 1,
        ..step
    });
    let text = metrics.render().unwrap();
    let get = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("{s} missing:\n{text}"));
    let phase = |p: &str, part: &str| {
        get(&format!(
            r#"ferrite:scheduler_step_seconds_{part}{{phase="{p}"}}"#
        ))
    };
    assert_eq!(phase("forward", "count"), 2.0);
    assert!((phase("forward", "sum") - 0.06).abs() < 1e-9);
    assert!((phase("schedule", "sum") - 0.00008).abs() < 1e-12);
    assert!((phase("sample", "sum") - 0.0006).abs() < 1e-12);
    assert_eq!(
        get(r#"ferrite:scheduler_step_seconds_bucket{phase="forward",le="0.025"}"#),
        0.0
    );
    assert_eq!(
        get(r#"ferrite:scheduler_step_seconds_bucket{phase="forward",le="0.05"}"#),
        2.0
    );
    assert_eq!(get("ferrite:iteration_tokens_total_sum"), 101.0);
    assert_eq!(get(r#"ferrite:iteration_tokens_total_bucket{le="1"}"#), 1.0);
    assert_eq!(
        get(r#"ferrite:iteration_tokens_total_bucket{le="64"}"#),
        1.0
    );
    assert_eq!(
        get(r#"ferrite:iteration_tokens_total_bucket{le="128"}"#),
        2.0
    );
}

#[test]
fn the_sample_parser_reads_escapes_and_plain_lines() {
    let (name, labels, value) = parse_line(r#"x_total{a="q\"u\\o\nte",b="2"} 1.5"#).unwrap();
    assert_eq!((name.as_str(), value), ("x_total", 1.5));
    assert_eq!(labels["a"], "q\"u\\o\nte");
    assert_eq!(labels["b"], "2");
    assert_eq!(parse_line("y 3").unwrap().2, 3.0);
    assert!(parse_line("# HELP y z").is_none());
}

#[test]
fn speculative_counters_appear_only_when_the_engine_speculates() {
    let stats = Arc::new(EngineStats::default());
    let metrics = Metrics::new(&config(MetricNames::Vllm, "m"), Arc::clone(&stats));
    let text = metrics.render().unwrap();
    assert!(!text.contains("spec_decode"), "{text}");
    let s = &stats.speculation;
    s.enabled.store(true, Ordering::Relaxed);
    s.num_tokens.store(3, Ordering::Relaxed);
    s.num_drafts.store(10, Ordering::Relaxed);
    s.num_draft_tokens.store(30, Ordering::Relaxed);
    s.num_accepted_tokens.store(17, Ordering::Relaxed);
    for (i, v) in [9, 5, 3].into_iter().enumerate() {
        s.num_accepted_tokens_per_pos[i].store(v, Ordering::Relaxed);
    }
    let text = metrics.render().unwrap();
    let lines: Vec<_> = text.lines().filter_map(parse_line).collect();
    let value = |name: &str, position: Option<&str>| {
        lines
            .iter()
            .find(|(n, l, _)| n == name && l.get("position").map(String::as_str) == position)
            .map(|(_, _, v)| *v)
            .unwrap_or_else(|| panic!("{name} {position:?} missing:\n{text}"))
    };
    assert_eq!(value("vllm:spec_decode_num_drafts_total", None), 10.0);
    assert_eq!(value("vllm:spec_decode_num_draft_tokens_total", None), 30.0);
    assert_eq!(
        value("vllm:spec_decode_num_accepted_tokens_total", None),
        17.0
    );
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    assert_eq!(value(per_pos, Some("0")), 9.0);
    assert_eq!(value(per_pos, Some("2")), 3.0);
    assert!(
        !text.contains("position=\"3\""),
        "positions past k are not exported"
    );
}

/// The endpoint picker scrapes every 50 ms: a scrape must stay far below that. Measured here
/// with every histogram holding thousands of observations and speculation on (the most
/// series); the number is printed (`cargo test -- --nocapture`) and bounded at 1 ms.
#[test]
fn a_scrape_takes_well_under_a_millisecond() {
    let stats = Arc::new(EngineStats::default());
    stats.speculation.enabled.store(true, Ordering::Relaxed);
    stats.speculation.num_tokens.store(4, Ordering::Relaxed);
    let metrics = Metrics::new(&config(MetricNames::Vllm, "m"), Arc::clone(&stats));
    for i in 0..5_000u64 {
        metrics.observe_finished(&finished(
            FinishReason::Stop,
            400 + i % 5_000,
            1 + i as usize % 700,
        ));
        metrics.observe_token_gap(Duration::from_micros(100 + i * 7 % 90_000));
        metrics.observe_first_token(Duration::from_millis(i % 3_000));
    }
    let scrapes = 200;
    let started = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..scrapes {
        bytes += metrics.render().unwrap().len();
    }
    let per_scrape = started.elapsed() / scrapes;
    println!(
        "one scrape: {per_scrape:?} ({} bytes)",
        bytes / scrapes as usize
    );
    assert!(per_scrape < Duration::from_millis(1), "{per_scrape:?}");
}

#[test]
fn expert_load_is_exported_per_layer_and_expert_when_asked() {
    let load = Arc::new(ExpertLoad::new([2, 0, 3]));
    load.layer(0)[1].fetch_add(5, Ordering::Relaxed);
    load.layer(2)[2].fetch_add(7, Ordering::Relaxed);
    let asked = MetricsConfig {
        expert_load: Some(Arc::clone(&load)),
        ..config(MetricNames::Vllm, "m")
    };
    let text = Metrics::new(&asked, Arc::new(EngineStats::default()))
        .render()
        .unwrap();
    let get = |s: &str| sample(&text, s);
    assert_eq!(
        get(r#"ferrite:moe_expert_tokens_total{layer="0",expert="1"}"#),
        Some(5.0)
    );
    assert_eq!(
        get(r#"ferrite:moe_expert_tokens_total{layer="0",expert="0"}"#),
        Some(0.0)
    );
    assert_eq!(
        get(r#"ferrite:moe_expert_tokens_total{layer="2",expert="2"}"#),
        Some(7.0)
    );
    // The dense layer 1 has no series; five in all.
    assert_eq!(
        text.matches("ferrite:moe_expert_tokens_total{").count(),
        5,
        "{text}"
    );
    // Read at scrape time.
    load.layer(0)[1].fetch_add(1, Ordering::Relaxed);
    let again = Metrics::new(&asked, Arc::new(EngineStats::default()));
    load.layer(0)[1].fetch_add(1, Ordering::Relaxed);
    let text = again.render().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"ferrite:moe_expert_tokens_total{layer="0",expert="1"}"#
        ),
        Some(7.0)
    );
    // Not asked: no series.
    let text = test_metrics().render().unwrap();
    assert!(!text.contains("moe_expert_tokens"), "{text}");
}
