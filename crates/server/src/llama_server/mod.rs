//! llama-server's own wire format, for the editor plugins written against it (llama.vim,
//! llama.vscode): the `/infill` request and its answer. Its OpenAI-compatible endpoints are
//! ferrite's `openai` module.

pub mod early_stop;
pub mod infill;
pub mod result;
