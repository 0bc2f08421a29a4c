//! The flags of `ferrite run-batch`: its own, the model's, and the engine and chat flags of
//! `ferrite serve`.

use std::path::PathBuf;

use clap::Args;

use super::{heading, ChatFormatArgs, EngineArgs};

#[derive(Debug, Args)]
pub struct RunBatchArgs {
    /// The requests, one JSON object a line: {"custom_id": "...", "method": "POST", "url":
    /// "/v1/chat/completions" (or "/v1/completions", or another POST route of `ferrite
    /// serve`), "body": {...the request, without stream: true...}}.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// The results, one JSON object a line, in the order requests finish: {"id", "custom_id",
    /// "response": {"status_code", "request_id", "body"}, "error": null}, or "response": null
    /// and an "error" {"code", "message", "param", "line"} for a line that could not be sent.
    /// An existing file is resumed: lines it holds results for are skipped, the others
    /// appended.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// When resuming, run again the lines whose result is a failure (an "error" line, or a
    /// response whose status_code is not 200), e.g. after fixing them in the input: their old
    /// result lines are removed from the output file (rewritten through a temporary file
    /// beside it, renamed over it) and the new results appended. Successful results stay as
    /// they are.
    #[arg(long)]
    pub retry_failed: bool,
    /// Requests in flight at most [default: twice --max-num-seqs, so that a sequence slot the
    /// engine frees is taken at once by a request already tokenized].
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// A GGUF file, a Hugging Face model directory, or a hub id [default: SmolLM2-135M-Instruct,
    /// fetched on first use]. Each body's `model` must name it (--served-model-name), else its
    /// line is answered 404; --model instead sends every line to it.
    pub model: Option<String>,
    /// The model, as a flag (as `vllm run-batch --model`), which also sends every line to it:
    /// each body's `model` is replaced by the served model name, so that a file written for
    /// another server (OpenAI's batch files name gpt-4o-mini) runs as it is.
    #[arg(long = "model", id = "model_flag", value_name = "MODEL", conflicts_with = "model",
          help_heading = heading::MODEL)]
    pub model_flag: Option<String>,
    /// The model name the bodies must use, and the `model` of the answers [default: the model
    /// file's name].
    #[arg(long, help_heading = heading::MODEL)]
    pub served_model_name: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub chat: ChatFormatArgs,
}

impl RunBatchArgs {
    /// The model, given as MODEL or as --model.
    pub fn spec(&self) -> Option<&str> {
        self.model.as_deref().or(self.model_flag.as_deref())
    }
}
