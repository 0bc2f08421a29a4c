//! The model's text on its way in and out: chat templates rendered and prompts tokenized on the
//! tokenizer workers, and the detokenizer thread that turns the engine's tokens back into text
//! (incrementally, never half a character), cuts it at stop strings and hands it to the HTTP
//! tasks as [`messages`].

pub mod chat_template;
pub mod detokenizer;
pub mod fim;
pub mod harmony_inputs;
pub mod harmony_render;
pub mod incremental;
pub mod infill_prompt;
pub mod messages;
pub mod prefill;
pub mod stop_strings;
mod strftime;
pub mod token_text;
pub mod tokenizer_pool;
