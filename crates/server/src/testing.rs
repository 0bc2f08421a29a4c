//! Test support shared by the crate's unit tests: a small byte-level tokenizer, a metrics
//! registry, a reader of the Prometheus text format, and the harmony fixtures.

pub mod harmony_fixtures;

use std::collections::HashMap;
use std::sync::Arc;

use ferrite_engine::EngineStats;
use tokenizers::Tokenizer;

use crate::observe::metrics::{MetricNames, Metrics, MetricsConfig};

/// A small byte-level BPE tokenizer: one token per byte, a few merges, and the ChatML special
/// tokens, so tests exercise multi-byte characters split across tokens.
pub fn byte_level_tokenizer() -> Tokenizer {
    let byte_chars = gpt2_chars();
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_chars.iter().enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(i));
    }
    // Merges make multi-byte tokens too ("he", "ll", "hell", "Ġw"), as real vocabularies have.
    let merges = ["h e", "l l", "he ll", "Ġ w"];
    for m in merges {
        let token: String = m.split(' ').collect();
        let next = vocab.len();
        vocab.insert(token, serde_json::json!(next));
    }
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::json!({"id": vocab.len() + i, "content": s, "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let json = serde_json::json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges, "dropout": null,
            "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false}
    });
    Tokenizer::from_bytes(json.to_string().as_bytes()).unwrap()
}

fn gpt2_chars() -> Vec<char> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                char::from(b)
            } else {
                shifted += 1;
                char::from_u32(255 + shifted).unwrap()
            }
        })
        .collect()
}

pub fn metrics_config(names: MetricNames, model_name: &str) -> MetricsConfig {
    MetricsConfig {
        names,
        model_name: model_name.into(),
        max_model_len: 2048,
        page_size: 16,
        num_pages: 1000,
        enable_prefix_caching: false,
        expert_load: None,
    }
}

pub fn test_metrics() -> Arc<Metrics> {
    Arc::new(Metrics::new(
        &metrics_config(MetricNames::Ferrite, "m"),
        Arc::new(EngineStats::default()),
    ))
}

/// A sample line split into name, labels and value (a small parser of the text format,
/// written from the format's grammar rather than from the encoder).
pub fn parse_line(line: &str) -> Option<(String, HashMap<String, String>, f64)> {
    if line.starts_with('#') || line.is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_string(), HashMap::new(), value));
    };
    let mut labels = HashMap::new();
    let mut rest = rest.strip_suffix('}')?;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some((name.to_string(), labels, value))
}

/// The value of the sample `name{k="v",...}` (the given labels a subset of the sample's).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    let (want_name, want_labels, _) = parse_line(&format!("{series} 0"))?;
    text.lines()
        .filter_map(parse_line)
        .find_map(|(name, labels, value)| {
            let matches =
                name == want_name && want_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
            matches.then_some(value)
        })
}
