//! `ferrite generate`: one completion, streamed to stdout, with timings on stderr.

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context};
use ferrite_engine::{GenerationRequest, SamplingParams};
use ferrite_model::hf::GenerationDefaults;
use ferrite_server::{ChatTemplate, IncrementalDecoder};

use crate::cli::GenerateArgs;
use crate::engine_setup::start_engine;
use crate::model_source;

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let mut model = model_source::load_model(Some(&args.model), &args.engine)?;
    let tok = model.tokenizer.clone();
    let prompt = if args.chat {
        let source = tok
            .chat_template
            .as_deref()
            .context("this model has no chat template")?;
        let template =
            ChatTemplate::new(source, tok.bos_token.as_deref(), tok.eos_token.as_deref())?;
        let messages = [serde_json::json!({"role": "user", "content": args.prompt})];
        let text = template.render(&messages, true)?;
        encode(&tok.tokenizer, &text, false)?
    } else {
        encode(&tok.tokenizer, &args.prompt, true)?
    };
    let engine = start_engine(&mut model, &args.engine)?;
    let params = sampling_params(&args, &model.generation);
    let start = Instant::now();
    let num_prompt = prompt.len();
    engine.handle.add_request(GenerationRequest {
        id: 1,
        prompt,
        params,
        arrival: start,
    })?;
    let mut decoder = IncrementalDecoder::new(true);
    let mut stdout = std::io::stdout().lock();
    let mut first_token_at = None;
    let mut generated = 0usize;
    'steps: loop {
        let Ok(step) = engine.outputs.recv() else {
            bail!("the engine stopped")
        };
        for out in step.outputs.into_iter().filter(|o| o.id == 1) {
            for &t in &out.tokens {
                first_token_at.get_or_insert_with(Instant::now);
                generated += 1;
                if args.token_ids {
                    write!(stdout, "{}{t}", if generated > 1 { " " } else { "" })?;
                } else {
                    write!(stdout, "{}", decoder.push(&tok.tokenizer, t))?;
                }
            }
            stdout.flush()?;
            if out.finish.is_some() {
                if !args.token_ids {
                    write!(stdout, "{}", decoder.flush(&tok.tokenizer))?;
                }
                break 'steps;
            }
        }
    }
    writeln!(stdout)?;
    let end = Instant::now();
    engine.handle.shutdown();
    let ttft = first_token_at.unwrap_or(end) - start;
    let decode_time = end - first_token_at.unwrap_or(end);
    eprintln!(
        "prompt {num_prompt} tokens in {:.3}s ({:.1} tok/s); generated {generated} tokens, decode {:.1} tok/s",
        ttft.as_secs_f64(),
        num_prompt as f64 / ttft.as_secs_f64().max(1e-9),
        generated.saturating_sub(1) as f64 / decode_time.as_secs_f64().max(1e-9),
    );
    Ok(())
}

/// The flags, and where they are silent the model's generation_config.json: its sampling
/// settings apply when the temperature is the model's own.
fn sampling_params(args: &GenerateArgs, model: &GenerationDefaults) -> SamplingParams {
    let defaults = SamplingParams::default();
    let mut params = SamplingParams {
        temperature: args.temperature.unwrap_or(model.default_temperature()),
        seed: args.seed,
        max_tokens: args.max_tokens,
        ..defaults
    };
    if args.temperature.is_none() && model.do_sample {
        params.top_p = model.top_p.unwrap_or(defaults.top_p);
        params.top_k = model.top_k.unwrap_or(defaults.top_k);
        params.min_p = model.min_p.unwrap_or(defaults.min_p);
        params.repetition_penalty = model
            .repetition_penalty
            .unwrap_or(defaults.repetition_penalty);
    }
    params
}

fn encode(
    tokenizer: &tokenizers::Tokenizer,
    text: &str,
    add_special: bool,
) -> anyhow::Result<Vec<u32>> {
    tokenizer
        .encode(text, add_special)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt: {e}"))
}
