//! `ferrite doctor MODEL`: the checks people otherwise make by hand before serving a new model,
//! one line each (ok / warning / error, with the fix), exit status 1 when any is an error.
//!
//! The model is found and loaded as `serve` loads it (`model_source`), the engine built as
//! `serve` builds it (`engine_setup`); each check is a file here: `template` (the chat
//! template renders the canned conversation of `conversation` and survives the tokenizer),
//! `stop_ids` (the EOS ids of every file agree), `special_tokens` (one id each),
//! `vocabulary` (the tokenizer fits the embedding), `memory` (weights and K/V fit the
//! device) and `generation` (the backend loads every tensor and writes 16 greedy tokens);
//! `report` prints them.

mod conversation;
mod generation;
mod memory;
mod report;
mod special_tokens;
mod stop_ids;
mod template;
mod vocabulary;

use anyhow::bail;
use ferrite_model::tensor_names::TOKEN_EMBD;

use crate::cli::{Device, DoctorArgs, LoadFormat};
use crate::model_source::{self, LoadedModel, ModelFiles};
use report::{Check, Report, Status};

pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    if args.engine.load_format == LoadFormat::Dummy {
        bail!("ferrite doctor checks a model's files: --load-format dummy has none");
    }
    let template = match args.chat_template.as_deref() {
        Some(spec) => Some(crate::serve::chat_template_arg(spec)?),
        None => None,
    };
    let report = diagnose(&args, template);
    if args.json {
        println!("{}", report.json()?);
    } else {
        print!("{}", report.text());
    }
    if report.failed() {
        use std::io::Write;
        std::io::stdout().flush()?;
        std::process::exit(1);
    }
    Ok(())
}

fn device_name(device: Device) -> &'static str {
    match device {
        Device::Cpu => "cpu",
        Device::Cuda => "cuda",
    }
}

/// Every check, in order; a failure to find or load the model ends the list early.
fn diagnose(args: &DoctorArgs, template_override: Option<String>) -> Report {
    let engine = &args.engine;
    let mut report = Report {
        model: args.model.clone(),
        device: device_name(engine.device).into(),
        checks: Vec::new(),
    };
    let fix = "give a .gguf file, a Hugging Face model directory (config.json, *.safetensors, \
               tokenizer.json) or a hub id (org/name) as `ferrite serve` takes it";
    let files = match model_source::resolve(
        Some(&args.model),
        engine.revision.as_deref(),
        engine.download_dir.as_deref(),
    ) {
        Ok(files) => files,
        Err(e) => {
            report
                .checks
                .push(Check::error("model", format!("{e:#}"), fix));
            return report;
        }
    };
    let mut model = match model_source::load_files(&files, engine.map_pages()) {
        Ok(model) => model,
        Err(e) => {
            report.checks.push(Check::error(
                "model",
                format!("cannot load it: {e:#}"),
                "the message names the file or field at fault; an architecture ferrite lacks \
                 is listed in `ferrite doctor --help`",
            ));
            return report;
        }
    };
    report
        .checks
        .push(Check::ok("model", describe(&files, &model)));
    let chat_prompt = text_checks(&mut report, &files, &model, template_override);

    let tokens = engine
        .max_model_len
        .unwrap_or(model.config.max_position_embeddings);
    let need = memory::need(&model.config, &model.weights, engine.device, tokens);
    let memory = match memory::budget(engine.device, args.memory, engine.gpu_memory_utilization) {
        Ok(budget) => memory::check(&need, &budget),
        Err(e) => Check::error(
            "memory",
            format!("cannot tell the device's memory: {e:#}"),
            match engine.device {
                Device::Cuda => {
                    "run where the GPU is (nvidia-smi lists it) or with --device cpu; \
                     --memory BYTES checks the memory alone"
                }
                Device::Cpu => "give --memory BYTES",
            },
        ),
    };
    let fits = memory.status != Status::Error;
    report.checks.push(memory);
    if !fits {
        for name in ["backend", "generation"] {
            report
                .checks
                .push(Check::skipped(name, "not run: the memory check failed"));
        }
        return report;
    }
    match greedy_prompt(&model, chat_prompt) {
        Ok(prompt) => report
            .checks
            .extend(generation::check(&mut model, engine, prompt)),
        Err(check) => report.checks.push(check),
    }
    report
}

/// `GGUF file x.gguf: llama, 30 layers, ...`.
fn describe(files: &ModelFiles, model: &LoadedModel) -> String {
    let c = &model.config;
    let what = match files {
        ModelFiles::Gguf(path) => format!("GGUF file {}", path.display()),
        ModelFiles::Dir { dir, .. } => format!("Hugging Face directory {}", dir.display()),
    };
    format!(
        "{what}: {:?}, {} layers, hidden size {}, vocabulary {}, context {}",
        c.arch, c.num_layers, c.hidden_size, c.vocab_size, c.max_position_embeddings
    )
}

/// The checks on the model's text side: chat template, stop ids, special tokens, vocabulary.
/// Returns the greedy run's chat prompt, when the template rendered it.
fn text_checks(
    report: &mut Report,
    files: &ModelFiles,
    model: &LoadedModel,
    template_override: Option<String>,
) -> Option<String> {
    let tok = &model.tokenizer;
    let tokenizer = &tok.tokenizer;
    let source = template_override.or_else(|| tok.chat_template.clone());
    let (checks, rendered) = template::check(tok, source.as_deref());
    report.checks.extend(checks);

    let added: Vec<String> = tokenizer
        .get_added_tokens_decoder()
        .into_values()
        .map(|t| t.content)
        .collect();
    let added: Vec<&str> = added.iter().map(String::as_str).collect();
    let end_of_turn = rendered
        .conversation
        .as_deref()
        .and_then(|text| template::end_of_turn(text, &added));
    let tokenizer_ids = vocabulary::tokenizer_ids(tokenizer);
    let rows = model
        .weights
        .tensors
        .get(TOKEN_EMBD)
        .map_or(model.config.vocab_size, |t| t.rows());
    let sources = stop_ids::read(files, &|t| tokenizer.token_to_id(t));
    let name_of = |id: u32| tokenizer.id_to_token(id);
    let facts = stop_ids::Facts {
        vocab: tokenizer_ids.min(rows),
        stop_ids: &tok.eos_token_ids,
        end_of_turn: end_of_turn.map(|t| (t, tokenizer.token_to_id(t))),
        name_of: &name_of,
    };
    report.checks.push(stop_ids::check(&sources, &facts));

    let candidates = special_tokens::candidates(
        tokenizer,
        tok.bos_token.as_deref(),
        tok.eos_token.as_deref(),
        source.as_deref(),
        rendered.conversation.as_deref(),
    );
    report
        .checks
        .push(special_tokens::check(tokenizer, &candidates));
    report.checks.push(vocabulary::check(
        tokenizer_ids,
        rows,
        model.config.vocab_size,
    ));
    rendered.prompt
}

/// The canned question through the chat template when it rendered, else a plain completion
/// prompt (with the tokenizer's bos).
fn greedy_prompt(
    model: &LoadedModel,
    chat_prompt: Option<String>,
) -> Result<generation::Prompt, Check> {
    let tokenizer = &model.tokenizer.tokenizer;
    let (text, add_special, what) = match &chat_prompt {
        Some(text) => (
            text.as_str(),
            false,
            format!("the chat question {:?}", conversation::GREEDY_QUESTION),
        ),
        None => (
            conversation::GREEDY_COMPLETION,
            true,
            format!(
                "the completion prompt {:?} (no chat template)",
                conversation::GREEDY_COMPLETION
            ),
        ),
    };
    match tokenizer.encode(text, add_special) {
        Ok(e) => Ok(generation::Prompt {
            ids: e.get_ids().to_vec(),
            what,
        }),
        Err(e) => Err(Check::error(
            "generation",
            format!("cannot tokenize {what}: {e}"),
            "use the tokenizer the model was trained with",
        )),
    }
}
