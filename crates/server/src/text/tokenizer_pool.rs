//! A pool of OS threads that render chat templates and tokenize, so neither the async runtime
//! nor the scheduler ever spends time on text.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokenizers::Tokenizer;
use tokio::sync::oneshot;

use crate::error::ApiError;
use crate::text::chat_template::{ChatInputs, ChatTemplate, TemplateError};
use crate::text::harmony_render::{self, ChatRenderer, HarmonySystem, Piece};

/// The text side of a model: what the workers (and the detokenizer) need.
#[derive(Clone)]
pub struct TextModel {
    pub tokenizer: Tokenizer,
    pub chat_template: Option<String>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// The chat template, or the native harmony renderer (`--chat-renderer`).
    pub chat_renderer: ChatRenderer,
    /// The harmony system message's settings (`--harmony-date`).
    pub harmony: HarmonySystem,
}

impl TextModel {
    /// The harmony system settings where chat prompts are rendered natively in harmony.
    pub fn harmony_system(&self) -> Option<&HarmonySystem> {
        self.chat_renderer
            .renders_harmony(self.chat_template.as_deref())
            .then_some(&self.harmony)
    }
}

/// A rendered chat prompt and its token ids.
#[derive(Debug, Clone)]
pub struct ChatPrompt {
    pub text: String,
    pub ids: Vec<u32>,
}

enum Job {
    Encode {
        text: String,
        add_special_tokens: bool,
        reply: oneshot::Sender<Result<Vec<u32>, ApiError>>,
    },
    Chat {
        inputs: ChatInputs,
        reply: oneshot::Sender<Result<ChatPrompt, ApiError>>,
    },
    Decode {
        ids: Vec<u32>,
        skip_special_tokens: bool,
        reply: oneshot::Sender<Result<String, ApiError>>,
    },
}

#[derive(Clone)]
pub struct TokenizerPool {
    jobs: Sender<Job>,
}

impl TokenizerPool {
    /// Compiles the chat template once up front so a broken one fails at start-up, not per request.
    pub fn new(model: &TextModel, workers: usize) -> Result<Self, TemplateError> {
        if let Some(src) = &model.chat_template {
            ChatTemplate::new(src, model.bos_token.as_deref(), model.eos_token.as_deref())?;
        }
        let (jobs, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..workers.max(1) {
            let rx = Arc::clone(&rx);
            let model = model.clone();
            std::thread::Builder::new()
                .name(format!("ferrite-tokenizer-{i}"))
                .spawn(move || worker(model, rx))
                .map_err(|e| {
                    TemplateError::Compile(format!("cannot start a tokenizer worker: {e}"))
                })?;
        }
        Ok(Self { jobs })
    }

    pub async fn encode(
        &self,
        text: String,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.submit(
            Job::Encode {
                text,
                add_special_tokens,
                reply,
            },
            rx,
        )
        .await
    }

    pub async fn render_chat(
        &self,
        messages: Vec<Value>,
        add_generation_prompt: bool,
    ) -> Result<ChatPrompt, ApiError> {
        self.render_chat_inputs(ChatInputs::new(messages, add_generation_prompt))
            .await
    }

    /// Renders the chat template with tools and extra variables, and tokenizes the result.
    pub async fn render_chat_inputs(&self, inputs: ChatInputs) -> Result<ChatPrompt, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.submit(Job::Chat { inputs, reply }, rx).await
    }

    pub async fn decode(
        &self,
        ids: Vec<u32>,
        skip_special_tokens: bool,
    ) -> Result<String, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.submit(
            Job::Decode {
                ids,
                skip_special_tokens,
                reply,
            },
            rx,
        )
        .await
    }

    async fn submit<T>(
        &self,
        job: Job,
        rx: oneshot::Receiver<Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        let gone = || ApiError::internal("the tokenizer workers have stopped");
        self.jobs.send(job).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

/// Request templates (`chat_template` in the body) a worker keeps compiled: clients that send
/// one tend to send the same one with every request.
const REQUEST_TEMPLATES_KEPT: usize = 4;

fn worker(model: TextModel, jobs: Arc<Mutex<Receiver<Job>>>) {
    let template = model.chat_template.as_deref().and_then(|src| {
        ChatTemplate::new(src, model.bos_token.as_deref(), model.eos_token.as_deref()).ok()
    });
    // Most recently used last.
    let mut request_templates: Vec<(String, ChatTemplate)> = Vec::new();
    let harmony = model
        .harmony_system()
        .cloned()
        .map(|system| (system, literal_tokenizer(&model.tokenizer)));
    let specials = (model.bos_token.clone(), model.eos_token.clone());
    let tokenizer = model.tokenizer;
    loop {
        // Holding the lock only while waiting hands each job to exactly one idle worker.
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(job) = job else { return };
        match job {
            Job::Encode {
                text,
                add_special_tokens,
                reply,
            } => {
                let _ = reply.send(encode(&tokenizer, &text, add_special_tokens));
            }
            Job::Chat { inputs, reply } => {
                // A request's own template wins over the model's and over the harmony renderer.
                let result = match inputs.template.as_deref() {
                    Some(src) => request_template(&mut request_templates, src, &specials)
                        .and_then(|t| render_template(t, &inputs, &tokenizer)),
                    None => match (&harmony, &template) {
                        (Some((system, literal)), _) => render_harmony(&inputs, system, literal),
                        (None, Some(t)) => render_template(t, &inputs, &tokenizer),
                        (None, None) => {
                            Err(ApiError::bad_request(TemplateError::Missing.to_string()))
                        }
                    },
                };
                let _ = reply.send(result);
            }
            Job::Decode {
                ids,
                skip_special_tokens,
                reply,
            } => {
                let result = tokenizer
                    .decode(&ids, skip_special_tokens)
                    .map_err(|e| ApiError::bad_request(format!("cannot decode these tokens: {e}")));
                let _ = reply.send(result);
            }
        }
    }
}

/// The request's own template, compiled once and kept among the worker's last few.
fn request_template<'a>(
    kept: &'a mut Vec<(String, ChatTemplate)>,
    src: &str,
    (bos, eos): &(Option<String>, Option<String>),
) -> Result<&'a ChatTemplate, ApiError> {
    match kept.iter().position(|(s, _)| s == src) {
        Some(i) => {
            let entry = kept.remove(i);
            kept.push(entry);
        }
        None => {
            let compiled = ChatTemplate::new(src, bos.as_deref(), eos.as_deref())
                .map_err(|e| ApiError::invalid_param("chat_template", e.to_string()))?;
            if kept.len() == REQUEST_TEMPLATES_KEPT {
                kept.remove(0);
            }
            kept.push((src.to_string(), compiled));
        }
    }
    Ok(&kept.last().expect("just pushed").1)
}

/// The chat template's rendering of `inputs`, tokenized.
fn render_template(
    template: &ChatTemplate,
    inputs: &ChatInputs,
    tokenizer: &Tokenizer,
) -> Result<ChatPrompt, ApiError> {
    template
        .render_inputs(inputs)
        .map_err(|e| ApiError::bad_request(e.to_string()))
        // Templates write their own BOS/special tokens into the text, so the tokenizer adds
        // its own only when asked (`add_special_tokens`).
        .and_then(|text| {
            encode(tokenizer, &text, inputs.add_special_tokens).map(|ids| ChatPrompt { text, ids })
        })
}

/// A copy of the tokenizer that reads special tokens' text as text: harmony's text pieces are
/// tokenized as openai-harmony tokenizes them (`encode_ordinary`).
fn literal_tokenizer(tokenizer: &Tokenizer) -> Tokenizer {
    let mut literal = tokenizer.clone();
    literal.set_encode_special_tokens(true);
    literal
}

fn render_harmony(
    inputs: &ChatInputs,
    system: &HarmonySystem,
    literal: &Tokenizer,
) -> Result<ChatPrompt, ApiError> {
    if inputs.continue_final_message {
        return Err(ApiError::invalid_param(
            "messages",
            "continuing the final assistant message (`continue_final_message`, or a final \
             assistant turn) is not supported for models rendered in harmony (gpt-oss)",
        ));
    }
    let pieces = harmony_render::render(inputs, system)
        .map_err(|e| ApiError::invalid_param(e.param(), e.to_string()))?;
    let mut ids = encode_pieces(literal, &pieces)?;
    if inputs.add_special_tokens {
        ids = with_special_tokens(literal, ids)?;
    }
    Ok(ChatPrompt {
        text: harmony_render::prompt_text(&pieces),
        ids,
    })
}

/// Each text piece tokenized on its own and each special token by its id, as openai-harmony
/// renders (`literal` reads special tokens' text as text).
pub fn encode_pieces(literal: &Tokenizer, pieces: &[Piece]) -> Result<Vec<u32>, ApiError> {
    let mut ids = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Special(token) => ids.push(literal.token_to_id(token).ok_or_else(|| {
                ApiError::internal(format!(
                    "the tokenizer has no {token} token: it is not gpt-oss's (o200k_harmony); \
                     start the server with --chat-renderer template"
                ))
            })?),
            Piece::Text(text) => ids.extend(encode(literal, text, false)?),
        }
    }
    Ok(ids)
}

/// `ids` with what the tokenizer's post-processor adds around a text (a BOS, ...).
fn with_special_tokens(tokenizer: &Tokenizer, ids: Vec<u32>) -> Result<Vec<u32>, ApiError> {
    let tokens = ids
        .into_iter()
        .map(|id| tokenizers::Token::new(id, String::new(), (0, 0)))
        .collect();
    let encoding = tokenizers::Encoding::from_tokens(tokens, 0);
    tokenizer
        .post_process(encoding, None, true)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| ApiError::internal(format!("cannot add the special tokens: {e}")))
}

fn encode(
    tokenizer: &Tokenizer,
    text: &str,
    add_special_tokens: bool,
) -> Result<Vec<u32>, ApiError> {
    tokenizer
        .encode(text, add_special_tokens)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| ApiError::bad_request(format!("cannot tokenize the prompt: {e}")))
}

#[cfg(test)]
mod tests;
