//! The server's prefix-cache counters, read from its Prometheus `/metrics` before and after a
//! run: the hit rate is Δhits / Δqueries (prompt tokens found in the cache over those looked up).

use serde::Serialize;

use crate::client::HttpClient;

/// How a server counts prefix-cache lookups, in prompt tokens.
struct CounterNames {
    /// Tokens found in the cache.
    hits: &'static str,
    /// Tokens looked up, or (`counts_misses`) tokens not found and computed.
    other: &'static str,
    counts_misses: bool,
}

/// Looked for in this order: ferrite's, vLLM's (V1), vLLM's older `gpu_` names, and
/// llama-server's (with `--metrics`), whose `prompt_tokens_total` counts only the prompt tokens
/// it computed. SGLang exposes no such counters.
const COUNTER_NAMES: &[CounterNames] = &[
    CounterNames {
        hits: "ferrite:prefix_cache_hits_total",
        other: "ferrite:prefix_cache_queries_total",
        counts_misses: false,
    },
    CounterNames {
        hits: "vllm:prefix_cache_hits_total",
        other: "vllm:prefix_cache_queries_total",
        counts_misses: false,
    },
    CounterNames {
        hits: "vllm:gpu_prefix_cache_hits_total",
        other: "vllm:gpu_prefix_cache_queries_total",
        counts_misses: false,
    },
    CounterNames {
        hits: "llamacpp:prompt_tokens_cached_total",
        other: "llamacpp:prompt_tokens_total",
        counts_misses: true,
    },
];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheCounters {
    /// The metric the numbers came from.
    pub metric: String,
    pub hits: f64,
    pub queries: f64,
}

/// The first known counter pair in a Prometheus text exposition, summed over label sets.
pub fn parse(text: &str) -> Option<CacheCounters> {
    COUNTER_NAMES.iter().find_map(|names| {
        let hits = sum_of(text, names.hits)?;
        let other = sum_of(text, names.other)?;
        Some(CacheCounters {
            metric: names.hits.to_string(),
            hits,
            queries: if names.counts_misses {
                hits + other
            } else {
                other
            },
        })
    })
}

fn sum_of(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        // The name must end here: labels, or the value after a space.
        let value = if let Some(labelled) = rest.strip_prefix('{') {
            labelled.rsplit_once('}').map(|(_, v)| v)
        } else if rest.starts_with(' ') {
            Some(rest)
        } else {
            None
        };
        // A sample may carry a timestamp after its value.
        if let Some(v) = value.and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok()) {
            *total.get_or_insert(0.0) += v;
        }
    }
    total
}

/// The counters now, or `None` when the server has no `/metrics` or none of the known names.
pub async fn scrape(client: &HttpClient) -> Option<CacheCounters> {
    match client.get_text("/metrics").await {
        Ok((200, text)) => parse(&text),
        _ => None,
    }
}

/// What the report says about the server's prefix cache over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrefixCacheDelta {
    pub metric: String,
    pub hits: f64,
    pub queries: f64,
    /// `None` when no prompt token was looked up.
    pub hit_rate: Option<f64>,
}

pub fn delta(before: &CacheCounters, after: &CacheCounters) -> Option<PrefixCacheDelta> {
    if before.metric != after.metric {
        return None;
    }
    let hits = after.hits - before.hits;
    let queries = after.queries - before.queries;
    Some(PrefixCacheDelta {
        metric: after.metric.clone(),
        hits,
        queries,
        hit_rate: (queries > 0.0).then(|| hits / queries),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_labels_and_other_metrics_ignored() {
        let text = "\
# HELP ferrite:prefix_cache_hits_total Prompt tokens found in the prefix cache.
# TYPE ferrite:prefix_cache_hits_total counter
ferrite:prefix_cache_hits_total{model_name=\"a\"} 30
ferrite:prefix_cache_hits_total{model_name=\"b\",x=\"}\"} 12 1700000000
ferrite:prefix_cache_hits_total_extra 999
ferrite:prefix_cache_queries_total 100
";
        let c = parse(text).unwrap();
        assert_eq!((c.hits, c.queries), (42.0, 100.0));
        assert_eq!(c.metric, "ferrite:prefix_cache_hits_total");
    }

    #[test]
    fn vllm_names_are_understood_and_servers_without_counters_give_none() {
        let v = "vllm:prefix_cache_queries_total{engine=\"0\"} 8.0\nvllm:prefix_cache_hits_total{engine=\"0\"} 2.0\n";
        let c = parse(v).unwrap();
        assert_eq!((c.hits, c.queries), (2.0, 8.0));
        assert_eq!(parse("sglang:cache_hit_rate 0.5\n"), None);
        // Hits without queries is no usable pair.
        assert_eq!(parse("ferrite:prefix_cache_hits_total 5\n"), None);
    }

    #[test]
    fn llama_server_counts_computed_and_cached_prompt_tokens_apart() {
        let text = "llamacpp:prompt_tokens_total 23\nllamacpp:prompt_tokens_cached_total 24\n";
        let c = parse(text).unwrap();
        assert_eq!((c.hits, c.queries), (24.0, 47.0));
    }

    #[test]
    fn the_delta_is_the_run_s_share() {
        let at = |h, q| CacheCounters {
            metric: "m".into(),
            hits: h,
            queries: q,
        };
        let d = delta(&at(10.0, 20.0), &at(40.0, 60.0)).unwrap();
        assert_eq!(d.hit_rate, Some(0.75));
        assert_eq!(delta(&at(1.0, 2.0), &at(1.0, 2.0)).unwrap().hit_rate, None);
    }
}
