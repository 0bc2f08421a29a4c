//! The flags of `ferrite generate`.

use clap::Args;

use super::EngineArgs;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// A GGUF file, a Hugging Face model directory, or a hub id.
    pub model: String,
    /// The prompt text.
    #[arg(long)]
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// New tokens at most.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy [default: the model's generation_config.json (with
    /// its top_p, top_k, min_p, repetition_penalty) when it samples, else 0].
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Seed for sampling.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the generated token ids (one line, space-separated) instead of the text: for
    /// comparing runs exactly, e.g. with and without speculative decoding.
    #[arg(long)]
    pub token_ids: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}
