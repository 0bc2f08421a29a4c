//! The backend and generation checks: the engine built as `serve` builds it (the plan's shape
//! checks, the backend's `supports` and its weight loader, which name a missing or misshapen
//! tensor), then 16 greedy tokens of a canned prompt on it.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use ferrite_engine::{FinishReason, GenerationRequest, SamplingParams};

use super::report::Check;
use crate::cli::EngineArgs;
use crate::engine_setup::{start_engine, RunningEngine};
use crate::model_source::LoadedModel;

const BACKEND: &str = "backend";
const GENERATION: &str = "generation";
pub const GREEDY_TOKENS: usize = 16;
/// Longer than any model's 16 tokens take on a CPU.
const STEP_TIMEOUT: Duration = Duration::from_secs(600);

/// The greedy run's prompt: token ids and what they are, for the message.
pub struct Prompt {
    pub ids: Vec<u32>,
    pub what: String,
}

/// Builds the engine on `args.device` (the weights move into it) and runs the prompt on it;
/// the `backend` and `generation` checks.
pub fn check(model: &mut LoadedModel, args: &EngineArgs, prompt: Prompt) -> Vec<Check> {
    let device = format!("{:?}", args.device).to_lowercase();
    let (arch, layers) = (model.config.arch, model.config.num_layers);
    let tensors = model.weights.tensors.len();
    let engine = match start_engine(model, args) {
        Ok(engine) => engine,
        Err(e) => {
            return vec![
                Check::error(
                    BACKEND,
                    format!("the {device} backend cannot run this model: {e:#}"),
                    backend_fix(&format!("{e:#}")),
                ),
                Check::skipped(GENERATION, "the engine did not start"),
            ]
        }
    };
    let backend = Check::ok(
        BACKEND,
        format!("{device} runs {arch:?}: {layers} layers, {tensors} tensors loaded"),
    );
    let generation = greedy(engine, &model.tokenizer.tokenizer, prompt);
    vec![backend, generation]
}

/// What to do about the engine's refusal, by what its message says.
fn backend_fix(message: &str) -> &'static str {
    let says = |words: &[&str]| words.iter().any(|w| message.contains(w));
    if says(&[
        "is missing",
        "has shape",
        "the config says",
        "bytes, its shape",
    ]) {
        "the file lacks a tensor the architecture needs, or has one of another shape: it is \
         incomplete or not the model its config names; download or convert it again"
    } else if says(&["CUDA driver", "CUDA device"]) {
        "run where the GPU is (nvidia-smi lists it), or with --device cpu"
    } else if says(&["max_model_len", "KV cache memory", "KV cache"]) {
        "give --kv-cache-memory more, or a smaller --max-model-len"
    } else if says(&["not implemented", "not supported", "must be"]) {
        "this backend lacks a kernel the model needs: try the other --device, or a model \
         of a supported shape"
    } else {
        "the message names what the backend refused"
    }
}

fn greedy(engine: RunningEngine, tokenizer: &tokenizers::Tokenizer, prompt: Prompt) -> Check {
    let started = Instant::now();
    let request = GenerationRequest {
        id: 1,
        prompt: prompt.ids,
        params: SamplingParams {
            temperature: 0.0,
            max_tokens: GREEDY_TOKENS,
            ..SamplingParams::default()
        },
        arrival: started,
    };
    let result = collect(&engine, request);
    engine.handle.shutdown();
    let (tokens, finish) = match result {
        Ok(done) => done,
        Err(e) => {
            return Check::error(
                GENERATION,
                format!("the engine failed on {}: {e:#}", prompt.what),
                "run `ferrite generate` with RUST_LOG=debug on the same model for the log",
            )
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let text = tokenizer
        .decode(&tokens, true)
        .unwrap_or_else(|e| format!("<cannot decode: {e}>"));
    judge(&tokens, finish, &text, seconds, &prompt.what)
}

/// The tokens of request 1 and how it finished.
fn collect(
    engine: &RunningEngine,
    request: GenerationRequest,
) -> anyhow::Result<(Vec<u32>, Option<FinishReason>)> {
    engine.handle.add_request(request)?;
    let mut tokens = Vec::new();
    loop {
        let step = match engine.outputs.recv_timeout(STEP_TIMEOUT) {
            Ok(step) => step,
            Err(RecvTimeoutError::Timeout) => {
                anyhow::bail!("no step in {} s", STEP_TIMEOUT.as_secs())
            }
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the engine stopped"),
        };
        for out in step.outputs.into_iter().filter(|o| o.id == 1) {
            tokens.extend(out.tokens);
            if let Some(finish) = out.finish {
                return Ok((tokens, Some(finish)));
            }
        }
    }
}

/// The greedy tokens: ok, unless there are none, or one token over and over.
fn judge(
    tokens: &[u32],
    finish: Option<FinishReason>,
    text: &str,
    seconds: f64,
    what: &str,
) -> Check {
    let ended = match finish {
        Some(FinishReason::Stop) => ", ended by a stop id",
        _ => "",
    };
    let shown = format!(
        "{} greedy tokens of {what} in {seconds:.2} s{ended}: {text:?} {tokens:?}",
        tokens.len()
    );
    if tokens.is_empty() {
        return Check::error(
            GENERATION,
            format!("no token for {what} (finish: {finish:?})"),
            "the engine refused the prompt: its log (RUST_LOG=debug) says why",
        );
    }
    if finish == Some(FinishReason::Stop) && tokens.len() == 1 {
        return Check::warning(
            GENERATION,
            format!("the model ends at once: {shown}"),
            "its first token is a stop id: check the stop ids above and the chat template's \
             generation prompt",
        );
    }
    if tokens.len() == GREEDY_TOKENS && tokens.iter().all(|&t| t == tokens[0]) {
        return Check::warning(
            GENERATION,
            format!("one token over and over: {shown}"),
            "the weights, their format or the tokenizer are likely not the model's: compare \
             with its reference implementation (transformers) on the same prompt",
        );
    }
    Check::ok(GENERATION, shown)
}

#[cfg(test)]
mod tests {
    use super::super::report::Status;
    use super::*;

    #[test]
    fn the_fix_follows_the_refusal() {
        assert!(
            backend_fix("weight `blk.3.ffn_down.weight` is missing from the model file")
                .contains("lacks a tensor")
        );
        assert!(backend_fix("cannot load the CUDA driver (libcuda.so)").contains("--device cpu"));
        assert!(
            backend_fix("max_model_len 9000 exceeds the 4096 tokens the KV cache holds")
                .contains("--kv-cache-memory")
        );
        assert!(
            backend_fix("per-layer inputs (Gemma 4) are not implemented on the CUDA backend")
                .contains("other --device")
        );
    }

    #[test]
    fn greedy_tokens_are_judged() {
        let ok = judge(
            &[1, 2, 3],
            Some(FinishReason::Stop),
            "a b",
            0.5,
            "the prompt",
        );
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.message.contains("3 greedy tokens"), "{}", ok.message);
        assert!(ok.message.contains("\"a b\""), "{}", ok.message);
        assert_eq!(
            judge(&[], Some(FinishReason::Abort), "", 0.1, "p").status,
            Status::Error
        );
        assert_eq!(
            judge(&[2], Some(FinishReason::Stop), "", 0.1, "p").status,
            Status::Warning
        );
        let stuck = [7; GREEDY_TOKENS];
        assert_eq!(
            judge(&stuck, Some(FinishReason::Length), "x", 0.1, "p").status,
            Status::Warning
        );
    }
}
