//! The flags of `ferrite doctor`.

use clap::Args;

use super::EngineArgs;
use crate::byte_size::parse_byte_size;

/// `ferrite doctor --help`'s description (set on the subcommand in cli.rs).
pub const LONG_ABOUT: &str = "Check a model before serving it, one line per check: ok, warning \
or error, with the fix when not ok (skipped: not run because an earlier check failed). Exit \
status 1 when any check is an error, 0 otherwise (warnings alone included).

Checks: the model loads; the chat template renders a conversation with a system prompt, a \
user message, tools, a tool call and its result and reasoning (those the template speaks of) \
and the rendered text tokenizes and decodes back to itself; the EOS and stop ids of every \
file (GGUF metadata, tokenizer_config.json, generation_config.json, config.json) agree and \
lie in the vocabulary, and the template's end-of-turn token is one of them; bos, eos and the \
template's special tokens encode as one id each; the tokenizer's ids fit the model's \
embedding; the weights plus the K/V of --max-model-len tokens fit the device's memory (or \
--memory); the backend of --device loads every tensor; and 16 greedy tokens of a canned \
prompt, printed decoded.

The engine flags below are serve's: give doctor the ones you serve with. --max-model-len is \
also the context the memory check counts K/V for [default: the model's trained context].";

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The model, as `ferrite serve` takes it: a GGUF file, a Hugging Face model directory,
    /// or a hub id (org/name, downloaded into the Hugging Face cache).
    pub model: String,
    /// Print the checks as one JSON object ({model, device, checks: [{name, status, message,
    /// fix}]}) instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Check against this much memory instead of the device's (this machine's RAM on the
    /// CPU, the GPU's memory times --gpu-memory-utilization on CUDA): bytes, or with a suffix
    /// (512MiB, 16GiB, 80GB).
    #[arg(long, value_parser = parse_byte_size, value_name = "BYTES")]
    pub memory: Option<usize>,
    /// Check this chat template instead of the model's, as `serve --chat-template` takes it:
    /// a file, or the template itself.
    #[arg(long, value_name = "FILE|TEMPLATE")]
    pub chat_template: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}
