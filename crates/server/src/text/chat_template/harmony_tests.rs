//! gpt-oss's chat template rendered by ferrite against openai-harmony's rendering of the same
//! conversations (`scripts/make_harmony_fixtures.py`). The template is the one gpt-oss ships;
//! `tests/fixtures/harmony/README.md` says where it comes from.

use super::{template_reads_effort, ChatTemplate};
use crate::testing::harmony_fixtures::{self, chat_inputs, Conversation};
use crate::text::harmony_inputs::harmony_messages;

const TEMPLATE: &str = include_str!("../../../tests/fixtures/harmony/gpt-oss-chat_template.jinja");

/// The conversations this comparison covers; the fixtures' others are for the native renderer
/// (`text::harmony_render`), which is what serves gpt-oss unless `--chat-renderer template`.
const TEMPLATE_CONVERSATIONS: usize = 14;

fn conversations() -> Vec<Conversation> {
    let mut all = harmony_fixtures::conversations();
    all.truncate(TEMPLATE_CONVERSATIONS);
    all
}

/// ferrite's rendering, with the date the template writes (today's) replaced by the one
/// openai-harmony was given.
fn render(conv: &Conversation) -> String {
    let mut inputs = chat_inputs(conv, template_reads_effort(TEMPLATE));
    harmony_messages(&mut inputs.messages);
    let template = ChatTemplate::new(TEMPLATE, None, None).unwrap();
    let text = template.render_inputs(&inputs).unwrap();
    let label = "Current date: ";
    let at = text.find(label).expect("the template writes the date") + label.len();
    let today = text.as_bytes()[at..at + 10].to_vec();
    assert!(
        today[4] == b'-' && today[7] == b'-',
        "{}",
        String::from_utf8_lossy(&today)
    );
    format!("{}{}{}", &text[..at], conv.date, &text[at + 10..])
}

/// Where the template gpt-oss ships writes something other than openai-harmony (and so other
/// than what transformers renders from it too): (conversation, harmony's text, the template's).
/// The instructions without tools keep a trailing blank line, a function without parameters
/// is `()` rather than `(_: {\n})`, and a tool's result goes through `tojson`, which quotes it
/// as a JSON string.
const TEMPLATE_DIFFERS: &[(&str, &str, &str)] = &[
    ("system_and_user", "terse.<|end|>", "terse.\n\n<|end|>"),
    ("developer_and_user", "French.<|end|>", "French.\n\n<|end|>"),
    ("effort_high", "hard.<|end|>", "hard.\n\n<|end|>"),
    ("tool_without_parameters", "(_: {\n}) => any;", "() => any;"),
    (
        "tool_call_and_result",
        ">20 degrees, sunny<",
        ">\"20 degrees, sunny\"<",
    ),
    (
        "tool_call_with_thinking",
        ">20 degrees, sunny<",
        ">\"20 degrees, sunny\"<",
    ),
    (
        "tool_round_then_answer",
        ">20 degrees, sunny<",
        ">\"20 degrees, sunny\"<",
    ),
    (
        "json_tool_result",
        ">{\"temp\": 20}<",
        ">\"{\\\"temp\\\": 20}\"<",
    ),
];

#[test]
fn the_gpt_oss_template_renders_what_openai_harmony_renders() {
    let mut differ = Vec::new();
    let mut identical = 0;
    for conv in conversations() {
        let mut want = conv.harmony_text.clone();
        for (_, harmony, template) in TEMPLATE_DIFFERS.iter().filter(|d| d.0 == conv.name) {
            assert_eq!(want.matches(harmony).count(), 1, "{}: {harmony}", conv.name);
            want = want.replace(harmony, template);
        }
        identical += usize::from(want == conv.harmony_text);
        let ours = render(&conv);
        if ours != want {
            differ.push(format!(
                "{}:\n  ferrite: {ours:?}\n  expected: {want:?}",
                conv.name
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert_eq!(
        identical, 6,
        "conversations rendered exactly as openai-harmony does"
    );
}

#[test]
fn the_gpt_oss_template_selects_the_harmony_parsers_and_takes_the_effort() {
    use crate::output::reasoning::ReasoningFormat;
    use crate::output::tool_calls::ToolCallFormat;
    assert_eq!(
        ToolCallFormat::detect(TEMPLATE),
        Some(ToolCallFormat::Openai)
    );
    assert_eq!(
        ReasoningFormat::detect(TEMPLATE),
        Some(ReasoningFormat::OpenaiGptoss)
    );
    assert!(template_reads_effort(TEMPLATE));
}
