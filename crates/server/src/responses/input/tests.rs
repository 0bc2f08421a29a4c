use serde_json::json;

use super::*;

fn messages(instructions: Option<&str>, input: Value) -> Result<Vec<Value>, ApiError> {
    let input: Input = serde_json::from_value(input).unwrap();
    let msgs = chat_messages(instructions.map(String::from), input)?;
    Ok(msgs
        .into_iter()
        .map(|m| m.into_template_value().unwrap())
        .collect())
}

#[test]
fn a_string_input_is_a_user_message_after_the_instructions() {
    assert_eq!(
        messages(Some("Be brief."), json!("hi")).unwrap(),
        [
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "hi"})
        ]
    );
}

#[test]
fn parts_are_joined_and_developer_speaks_as_system() {
    let input = json!([
        {"role": "developer", "content": "rules"},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    ]);
    assert_eq!(
        messages(None, input).unwrap(),
        [
            json!({"role": "system", "content": "rules"}),
            json!({"role": "user", "content": "ab"})
        ]
    );
}

#[test]
fn echoed_output_becomes_one_assistant_turn_with_its_calls_and_reasoning() {
    let input = json!([
        {"role": "user", "content": "weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "call it"}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "22C"},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "noon"}]},
    ]);
    let got = messages(None, input).unwrap();
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[1],
        json!({"role": "assistant", "content": "Checking.", "reasoning_content": "call it",
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_time", "arguments": "{}"}}]})
    );
    assert_eq!(
        got[2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "22C"})
    );
    assert_eq!(
        got[3],
        json!({"role": "tool", "tool_call_id": "call_2", "content": "noon"})
    );
}

#[test]
fn a_call_with_no_message_before_it_opens_an_empty_assistant_turn() {
    let input = json!([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    ]);
    let got = messages(None, input).unwrap();
    assert_eq!(got[1]["role"], "assistant");
    assert_eq!(got[1]["content"], Value::Null);
    assert_eq!(got[1]["tool_calls"][0]["id"], "c");
}

#[test]
fn unsupported_items_parts_and_fields_are_a_400_on_input() {
    for (input, says) in [
        (
            json!([{"type": "item_reference", "id": "x"}]),
            "stores none",
        ),
        (
            json!([{"type": "web_search_call", "id": "x"}]),
            "`web_search_call`",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]),
            "`input_image` are not supported",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_text", "text": "a", "x": 1}]}]),
            "unknown field `x`",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_file"}]}]),
            "`input_file`",
        ),
        (json!([{"role": "critic", "content": "x"}]), "role `critic`"),
        (
            json!([{"role": "user", "content": "x", "colour": 1}]),
            "unknown field `colour`",
        ),
        (
            json!([{"type": "function_call", "call_id": "c", "name": "f"}]),
            "missing field `arguments`",
        ),
        (
            json!([{"type": "reasoning", "summary": [], "encrypted_content": "e"}]),
            "encrypted_content",
        ),
    ] {
        let e = messages(None, input.clone()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input"), "{input}");
        assert!(e.message.contains(says), "{input}: {}", e.message);
    }
}
