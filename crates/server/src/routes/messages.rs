//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API on the
//! shared chat path ([`start_chat`]). The request is translated into a chat turn
//! (`anthropic/translate.rs`), the answer's text read by the same [`OutputParser`] as OpenAI's
//! chat, and written as content blocks, complete or streamed (`messages_stream.rs`). Errors
//! are Anthropic's error body.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferrite_engine::ThinkingBudget;

use super::messages_stream;
use crate::anthropic::blocks::{assemble, BlockBuilder};
use crate::anthropic::error::{AnthropicError, AnthropicJson};
use crate::anthropic::request::{
    refuse_unimplemented, Conversation, CountTokensRequest, MessagesRequest, ThinkingConfig,
};
use crate::anthropic::response::{new_message_id, Message, StopReason, TokenCount};
use crate::anthropic::translate::chat_turn;
use crate::anthropic::turn_text::{TurnEnd, TurnText};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::chat_turn::{start_chat, StartedChat};
use crate::openai::chat::template_inputs;
use crate::openai::sampling::SamplingFields;
use crate::output::assistant_output::{OutputParser, OutputSpec};

pub async fn create_message(
    State(state): State<Arc<AppState>>,
    AnthropicJson(req): AnthropicJson<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    state.check_model(Some(&req.model))?;
    refuse_unimplemented(&req.rest)?;
    let max_tokens = req
        .max_tokens
        .ok_or_else(|| ApiError::invalid_param("max_tokens", "`max_tokens` is required"))?;
    let fields = SamplingFields {
        max_tokens: Some(max_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        ..SamplingFields::default()
    };
    let mut sampling = fields.validate(None, &state.sampling_defaults)?;
    // Matched by the detokenizer as stop strings, which reports the one that matched.
    sampling.stop = req.stop_sequences.unwrap_or_default();
    let reads_reasoning = state.reasoning_format.is_some();
    sampling.params.logit_rules.thinking_budget = thinking_budget(&state, &req.conversation);
    let turn = chat_turn(req.conversation, sampling.max_tokens, reads_reasoning)?;
    let StartedChat { submission, output } = start_chat(&state, turn, &mut sampling).await?;
    let reply = Message::started(
        new_message_id(),
        state.model_name.clone(),
        submission.prompt_ids.len(),
    );
    let text = TurnText::new(submission);
    if req.stream {
        return Ok(messages_stream::respond(text, output, reply));
    }
    complete(text, &output, reply).await
}

/// The prompt tokens the same `/v1/messages` request would have: the same translation and
/// template rendering, no generation.
pub async fn count_tokens(
    State(state): State<Arc<AppState>>,
    AnthropicJson(req): AnthropicJson<CountTokensRequest>,
) -> Result<Json<TokenCount>, AnthropicError> {
    state.check_model(Some(&req.model))?;
    refuse_unimplemented(&req.rest)?;
    let turn = chat_turn(req.conversation, None, state.reasoning_format.is_some())?;
    let mut inputs = template_inputs(
        turn.messages,
        turn.add_generation_prompt,
        turn.tools.as_deref(),
        turn.chat_template_kwargs,
    )?;
    inputs.continue_final_message = turn.continue_final_message;
    let prompt = state.tokenizers.render_chat_inputs(inputs).await?;
    Ok(Json(TokenCount {
        input_tokens: prompt.ids.len(),
    }))
}

/// Waits for the whole turn and answers it as one message.
async fn complete(
    mut text: TurnText,
    output: &OutputSpec,
    mut reply: Message,
) -> Result<Response, AnthropicError> {
    let mut all = String::new();
    let end = loop {
        let Some((piece, end)) = text.next().await else {
            return Err(ApiError::internal("a generation ended without finishing").into());
        };
        all.push_str(&piece);
        if let Some(end) = end {
            break end;
        }
    };
    reply.usage.output_tokens = text.output_tokens();
    // After a stop sequence the engine request is still running: dropping it aborts it.
    drop(text);
    let mut parser = OutputParser::new(output);
    let mut builder = BlockBuilder::default();
    let mut events = Vec::new();
    builder.on_events(parser.feed(&all), &mut events);
    builder.on_events(parser.finish(), &mut events);
    builder.finish(&mut events);
    reply.stop_reason = StopReason::of(&end, builder.called_tools());
    if reply.stop_reason.is_none() {
        return Err(ApiError::internal("the generation was aborted").into());
    }
    if let TurnEnd::StopSequence(sequence) = end {
        reply.stop_sequence = Some(sequence);
    }
    reply.content = assemble(&events);
    Ok(Json(reply).into_response())
}

/// `thinking.budget_tokens` as a logit rule: past the budget the model's `</think>` is forced,
/// ending the thinking block (where the model's reasoning ends with one such token).
fn thinking_budget(state: &AppState, conversation: &Conversation) -> Option<ThinkingBudget> {
    match conversation.thinking {
        Some(ThinkingConfig::Enabled { budget_tokens }) => Some(ThinkingBudget {
            tokens: usize::try_from(budget_tokens).ok()?,
            end: state.thinking_end?,
        }),
        _ => None,
    }
}
