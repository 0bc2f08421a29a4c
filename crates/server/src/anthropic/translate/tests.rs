use serde_json::{json, Value};

use super::*;
use crate::openai::chat::template_inputs;
use crate::text::chat_template::ChatInputs;

fn conversation(v: Value) -> Conversation {
    serde_json::from_value(v).unwrap()
}

/// The messages as the template sees them.
fn rendered(turn: ChatTurn) -> Vec<Value> {
    let inputs: ChatInputs = template_inputs(turn.messages, true, None, None).unwrap();
    inputs.messages
}

#[test]
fn system_text_blocks_and_strings_become_chat_messages() {
    let turn = chat_turn(
        conversation(json!({"system": [{"type": "text", "text": "Be brief."},
            {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "again"}]})),
        Some(10),
        false,
    )
    .unwrap();
    assert!(turn.tool_choice.is_none() && turn.chat_template_kwargs.is_none());
    assert_eq!(
        rendered(turn),
        vec![
            json!({"role": "system", "content": "Be brief.\nBe kind."}),
            json!({"role": "user", "content": "a\nb"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": "again"}),
        ]
    );
}

#[test]
fn tool_use_and_tool_result_blocks_become_calls_and_tool_messages() {
    let turn = chat_turn(
        conversation(json!({"messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "use the tool", "signature": ""},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "22C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                    "content": [{"type": "text", "text": "timeout"}]},
                {"type": "text", "text": "Thanks"}]}]})),
        None,
        false,
    )
    .unwrap();
    assert_eq!(
        rendered(turn),
        vec![
            json!({"role": "user", "content": "Weather in Paris?"}),
            json!({"role": "assistant", "content": "Let me check.",
                "reasoning_content": "use the tool",
                "tool_calls": [{"id": "toolu_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
            json!({"role": "tool", "content": "22C", "tool_call_id": "toolu_1"}),
            json!({"role": "tool", "content": "Error: timeout", "tool_call_id": "toolu_2"}),
            json!({"role": "user", "content": "Thanks"}),
        ]
    );
}

#[test]
fn an_assistant_turn_of_calls_only_has_no_content() {
    let turn = chat_turn(
        conversation(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]})),
        None,
        false,
    )
    .unwrap();
    let messages = rendered(turn);
    assert_eq!(messages[1]["content"], Value::Null);
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        json!("{}")
    );
    assert_eq!(messages[2]["content"], "");
}

#[test]
fn blocks_a_text_model_cannot_read_are_refused_by_place() {
    let image = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]});
    let e = chat_turn(conversation(image), None, false).unwrap_err();
    assert_eq!(
        (e.status.as_u16(), e.param.as_deref()),
        (400, Some("messages"))
    );
    assert!(
        e.message.contains("messages[0].content[1]"),
        "{}",
        e.message
    );
    assert!(e.message.contains("`image`"), "{}", e.message);
    for (bad, says) in [
        (
            json!({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}),
            "`tool_use`",
        ),
        (
            json!({"role": "user", "content": [{"type": "text", "text": "x", "citations": []}]}),
            "unknown field `citations`",
        ),
        (
            json!({"role": "system", "content": "x"}),
            "messages[0].role",
        ),
    ] {
        let e = chat_turn(conversation(json!({"messages": [bad]})), None, false).unwrap_err();
        assert!(e.message.contains(says), "{}", e.message);
    }
}

#[test]
fn a_final_assistant_turn_is_continued_and_may_not_end_in_whitespace() {
    let prefill = |last: serde_json::Value| {
        json!({"messages": [{"role": "user", "content": "x"},
            {"role": "assistant", "content": last}]})
    };
    let turn = chat_turn(conversation(prefill(json!("The answer is"))), None, false).unwrap();
    assert!(turn.continue_final_message && !turn.add_generation_prompt);
    let turn = chat_turn(
        conversation(json!({"messages": [{"role": "user", "content": "x"}]})),
        None,
        false,
    )
    .unwrap();
    assert!(!turn.continue_final_message && turn.add_generation_prompt);
    for spaced in [
        json!("The answer is "),
        json!([{"type": "text", "text": "The answer is\n"}]),
    ] {
        let e = chat_turn(conversation(prefill(spaced)), None, false).unwrap_err();
        assert!(e.message.contains("trailing whitespace"), "{}", e.message);
        assert!(e.message.contains("messages[1]"), "{}", e.message);
    }
}

#[test]
fn tools_and_tool_choice_translate_to_openai_ones() {
    let turn = chat_turn(
        conversation(json!({"messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "f", "description": "does f",
                "input_schema": {"type": "object", "properties": {}}}],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true}})),
        None,
        false,
    )
    .unwrap();
    let tools = turn.tools.unwrap();
    assert_eq!(
        serde_json::to_value(&tools).unwrap(),
        json!([{"type": "function", "function": {"name": "f", "description": "does f",
            "parameters": {"type": "object", "properties": {}}}}])
    );
    assert!(matches!(turn.tool_choice, Some(ToolChoice::Named(n)) if n.function.name == "f"));
    assert_eq!(turn.parallel_tool_calls, Some(false));
    let choices = [
        (json!({"type": "any"}), ToolChoiceMode::Required),
        (json!({"type": "auto"}), ToolChoiceMode::Auto),
        (json!({"type": "none"}), ToolChoiceMode::None),
    ];
    for (choice, mode) in choices {
        let (c, parallel) = chat_tool_choice(serde_json::from_value(choice).unwrap());
        assert!(matches!(c, ToolChoice::Mode(m) if m == mode));
        assert_eq!(parallel, None);
    }
    let server_tool = json!({"messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "bash_20250124", "name": "bash", "input_schema": {}}]});
    let e = chat_turn(conversation(server_tool), None, false).unwrap_err();
    assert!(e.message.contains("`bash_20250124`"), "{}", e.message);
}

#[test]
fn thinking_switches_the_template_variable_when_reasoning_is_read() {
    let ask = |thinking: Value, max_tokens, reads| {
        chat_turn(
            conversation(json!({"messages": [{"role": "user", "content": "x"}],
                "thinking": thinking})),
            Some(max_tokens),
            reads,
        )
        .map(|t| t.chat_template_kwargs.unwrap())
    };
    let off = ask(json!({"type": "disabled"}), 10, false).unwrap();
    assert_eq!(off["enable_thinking"], false);
    let on = ask(
        json!({"type": "enabled", "budget_tokens": 1024}),
        2000,
        true,
    )
    .unwrap();
    assert_eq!(on["enable_thinking"], true);
    let no_parser = ask(
        json!({"type": "enabled", "budget_tokens": 1024}),
        2000,
        false,
    );
    assert_eq!(no_parser.unwrap_err().param.as_deref(), Some("thinking"));
    for (budget, max_tokens) in [(1023, 4000), (2000, 2000)] {
        let e = ask(
            json!({"type": "enabled", "budget_tokens": budget}),
            max_tokens,
            true,
        );
        assert_eq!(e.unwrap_err().param.as_deref(), Some("thinking"));
    }
}

/// Qwen2.5-Coder-0.5B-Instruct's template, as its GGUF ships it.
const QWEN25: &str =
    include_str!("../../../../../fixtures/chat_templates/qwen2.5-coder-0.5b-instruct.jinja");

#[test]
fn a_tool_round_trip_renders_with_the_qwen_template() {
    let turn = chat_turn(
        conversation(json!({"system": "You answer weather questions.",
            "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                "content": "22C"}]}]})),
        None,
        false,
    )
    .unwrap();
    let inputs = template_inputs(turn.messages, true, None, None).unwrap();
    let template = crate::ChatTemplate::new(QWEN25, None, Some("<|im_end|>")).unwrap();
    let text = template.render_inputs(&inputs).unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nYou answer weather questions.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    );
}
