//! The grammars that hold a harmony answer (gpt-oss) to what the request asks: a forced tool
//! call (`tool_choice` "required" or a named function) or a structured output
//! (`response_format`, `structured_outputs`). A harmony answer is messages, and the constraint
//! belongs to one of them: the call message
//! `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{ARGUMENTS}<|call|>`
//! (as gpt-oss writes it, and as openai-harmony's cookbook shows it) or the final message
//! `<|channel|>final<|message|>{OUTPUT}<|return|>`. Before it the model may write one analysis
//! message, `<|channel|>analysis<|message|>THOUGHT<|end|><|start|>assistant`, its reasoning,
//! bounded in tokens so that the answer proper always gets its turn: at the bound the thought
//! ends (`<|end|>`) and the constrained message follows.
//!
//! The prompt ends with `<|start|>assistant`, so the grammar starts at the first message's
//! `<|channel|>`. `<|call|>` and `<|return|>` end gpt-oss's turns (they are among its end
//! tokens), so the answer ends right after the constrained message: one call at most, whatever
//! `parallel_tool_calls` says (gpt-oss calls one function per turn).

use serde_json::{json, Value};

use crate::openai::structured::GrammarRequest;
use crate::openai::tools::ToolSpec;
use crate::output::structured::json_layout;

/// The most tokens the analysis before the constrained message may take.
pub const MAX_ANALYSIS_TOKENS: usize = 1024;

/// The analysis bound for a request of `max_tokens`: at most half of them, so that the call or
/// the output has room after it.
pub fn analysis_budget(max_tokens: Option<usize>) -> usize {
    max_tokens.map_or(MAX_ANALYSIS_TOKENS, |m| (m / 2).min(MAX_ANALYSIS_TOKENS))
}

/// What the constrained message must be.
pub enum HarmonyAnswer<'a> {
    /// A call of one of these tools.
    Call(&'a [&'a ToolSpec]),
    /// A final message matching `output`, or (the request offers tools with `tool_choice`
    /// "auto") a call of one of `tools`.
    Final {
        output: &'a GrammarRequest,
        tools: &'a [&'a ToolSpec],
    },
}

/// The grammar (llguidance's Lark syntax) of a harmony answer: an optional analysis of at most
/// `analysis_tokens` tokens, then the constrained message. `token_id` gives the ids of the
/// harmony markers, special tokens of gpt-oss's vocabulary (spelled out where the tokenizer
/// lacks one, which a gpt-oss model never does).
pub fn harmony_lark(
    answer: &HarmonyAnswer<'_>,
    analysis_tokens: usize,
    token_id: impl Fn(&str) -> Option<u32>,
) -> String {
    let marker = |text: &str| match token_id(text) {
        Some(id) => format!("<[{id}]>"),
        None => json!(text).to_string(),
    };
    let mut rules = Vec::new();
    let mut answers = Vec::new();
    let (calls, output) = match answer {
        HarmonyAnswer::Call(tools) => (*tools, None),
        HarmonyAnswer::Final { output, tools } => (*tools, Some(*output)),
    };
    if let Some(output) = output {
        answers.push(format!(
            "{} \"final\" {} output {}",
            marker("<|channel|>"),
            marker("<|message|>"),
            marker("<|return|>"),
        ));
        rules.push(format!("output: {}", output_rule(output)));
    }
    for tool in calls {
        let mut parameters = parameters(tool);
        parameters["x-guidance"] = json_layout();
        answers.push(format!(
            "{} {} {} \"json\" {} %json {parameters} {}",
            marker("<|channel|>"),
            json!(format!("commentary to=functions.{} ", tool.function.name)),
            marker("<|constrain|>"),
            marker("<|message|>"),
            marker("<|call|>"),
        ));
    }
    let mut lark = String::new();
    if analysis_tokens > 0 {
        lark.push_str("start: analysis? answer\n");
        lark.push_str(&format!(
            "analysis: {} \"analysis\" {} thought {} {} \"assistant\"\n",
            marker("<|channel|>"),
            marker("<|message|>"),
            marker("<|end|>"),
            marker("<|start|>"),
        ));
        // The thought is any text (special tokens are never text), cut at the bound.
        lark.push_str(&format!(
            "thought[max_tokens={analysis_tokens}]: /(.|\\n)+/\n"
        ));
    } else {
        lark.push_str("start: answer\n");
    }
    lark.push_str(&format!("answer: {}\n", answers.join("\n      | ")));
    for rule in rules {
        lark.push_str(&rule);
        lark.push('\n');
    }
    lark
}

/// The final message's text as a Lark rule body.
fn output_rule(output: &GrammarRequest) -> String {
    match output {
        GrammarRequest::JsonSchema(schema) => {
            let mut schema = schema.clone();
            if let Value::Object(map) = &mut schema {
                map.entry("x-guidance").or_insert_with(json_layout);
            }
            format!("%json {schema}")
        }
        GrammarRequest::Regex(rx) => format!("%lark {{\nstart: /{}/\n}}", escape_slashes(rx)),
        GrammarRequest::Choice(choices) => choices
            .iter()
            .map(|c| json!(c).to_string())
            .collect::<Vec<_>>()
            .join(" | "),
        GrammarRequest::Lark(lark) => format!("%lark {{\n{lark}\n}}"),
    }
}

/// A regex as the text of a Lark `/.../` literal: its unescaped slashes escaped.
fn escape_slashes(rx: &str) -> String {
    let mut out = String::with_capacity(rx.len());
    let mut escaped = false;
    for c in rx.chars() {
        if c == '/' && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

/// A tool's parameters schema; an object of anything where it gives none.
pub(crate) fn parameters(t: &ToolSpec) -> Value {
    t.function
        .parameters
        .clone()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object"}))
}

#[cfg(test)]
mod tests;
