//! One structured log line per finished engine request (one per choice): id, token counts,
//! cached tokens, queue/prefill/decode times and the finish reason; token ids and the prompt
//! text only when asked for (prompt text is user data and stays out of logs by default).

use std::fmt;
use std::time::Duration;

use tokenizers::Tokenizer;

use crate::observe::finished_request::{reason_label, FinishedRequest};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestLogConfig {
    /// Log the prompt's and the output's token ids.
    pub token_ids: bool,
    /// Log the prompt text (the prompt tokens decoded, chat template included).
    pub prompts: bool,
    /// No line per request (`--disable-log-requests`): finished nor rejected.
    pub disabled: bool,
}

/// Token ids as a JSON array, so a log pipeline can parse the field.
struct IdList<'a>(&'a [u32]);

impl fmt::Display for IdList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, id) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}")?;
        }
        f.write_str("]")
    }
}

/// Seconds, to the microsecond.
fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e6
}

/// The log target operators filter on (`RUST_LOG=ferrite_server::request_log=warn`, as
/// `ferrite run-batch` does): named here so that it does not follow the module's path.
const TARGET: &str = "ferrite_server::request_log";

pub fn log_finished(r: &FinishedRequest, config: &RequestLogConfig, tokenizer: &Tokenizer) {
    if config.disabled {
        return;
    }
    let prompt_ids = r.prompt_ids.as_deref().map(Vec::as_slice);
    let prompt_text = match prompt_ids {
        Some(ids) if config.prompts => tokenizer.decode(ids, false).ok(),
        _ => None,
    };
    fn ids(v: Option<&[u32]>, wanted: bool) -> Option<tracing::field::DisplayValue<IdList<'_>>> {
        v.filter(|_| wanted)
            .map(|v| tracing::field::display(IdList(v)))
    }
    tracing::info!(
        target: TARGET,
        request_id = r.request_id.as_deref(),
        engine_id = r.id,
        prompt_tokens = r.num_prompt_tokens,
        output_tokens = r.num_generation_tokens,
        cached_tokens = r.num_cached_tokens,
        queue_s = secs(r.queue),
        prefill_s = secs(r.prefill),
        decode_s = secs(r.decode),
        ttft_s = r.time_to_first_token.map(secs),
        e2e_s = secs(r.e2e),
        finish_reason = reason_label(r.finish),
        spec_mean_acceptance_length = r.speculation.map(|s| s.mean_acceptance_length()),
        spec_drafted = r.speculation.map(|s| s.drafted),
        spec_accepted = r.speculation.map(|s| s.accepted),
        prompt_token_ids = ids(prompt_ids, config.token_ids),
        output_token_ids = ids(r.output_ids.as_deref(), config.token_ids),
        prompt = prompt_text.as_deref(),
        "request finished"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lists_are_json_arrays() {
        let parsed: Vec<u32> =
            serde_json::from_str(&IdList(&[7, 0, 4_000_000]).to_string()).unwrap();
        assert_eq!(parsed, vec![7, 0, 4_000_000]);
        assert_eq!(IdList(&[]).to_string(), "[]");
    }

    #[test]
    fn seconds_keep_microseconds() {
        assert_eq!(secs(Duration::from_nanos(1_234_567)), 0.001235);
        assert_eq!(secs(Duration::from_secs(3)), 3.0);
    }
}
