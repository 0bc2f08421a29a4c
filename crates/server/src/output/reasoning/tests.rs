use super::*;

/// Feeds `text` cut at `cuts`; returns the joined reasoning and content.
fn run(starts_in_reasoning: bool, text: &str, cuts: &[usize]) -> (String, String) {
    let mut parser = ReasoningParser::new(starts_in_reasoning);
    let mut events = Vec::new();
    let mut last = 0;
    for &cut in cuts.iter().chain(std::iter::once(&text.len())) {
        parser.feed(&text[last..cut], &mut events);
        last = cut;
    }
    parser.finish(&mut events);
    let (mut reasoning, mut content) = (String::new(), String::new());
    for e in events {
        match e {
            ReasoningEvent::Reasoning(r) => reasoning.push_str(&r),
            ReasoningEvent::Content(c) => content.push_str(&c),
        }
    }
    (reasoning, content)
}

fn split_everywhere(starts_in_reasoning: bool, text: &str) -> (String, String) {
    let whole = run(starts_in_reasoning, text, &[]);
    let cuts: Vec<usize> = (1..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    for &cut in &cuts {
        assert_eq!(
            run(starts_in_reasoning, text, &[cut]),
            whole,
            "{text:?} at {cut}"
        );
    }
    assert_eq!(
        run(starts_in_reasoning, text, &cuts),
        whole,
        "{text:?} char by char"
    );
    whole
}

fn pair(r: &str, c: &str) -> (String, String) {
    (r.to_string(), c.to_string())
}

#[test]
fn qwen3_think_block_then_answer() {
    let text = "<think>\nThe user wants 2+2 → 4.\n</think>\n\nIt is 4.";
    assert_eq!(
        split_everywhere(false, text),
        pair("The user wants 2+2 → 4.\n", "It is 4.")
    );
}

#[test]
fn no_think_block_is_all_content() {
    let text = "\nJust an answer with </think> inside";
    assert_eq!(split_everywhere(false, text), pair("", text));
    assert_eq!(split_everywhere(false, "<thin"), pair("", "<thin"));
}

#[test]
fn started_in_the_prompt_only_the_close_appears() {
    let text = "Let me think.</think>The answer.";
    assert_eq!(
        split_everywhere(true, text),
        pair("Let me think.", "The answer.")
    );
    // The model repeating the opening tag is not reasoning text.
    let repeated = "<think>\nhmm\n</think>\n\nok";
    assert_eq!(split_everywhere(true, repeated), pair("hmm\n", "ok"));
}

#[test]
fn an_unclosed_think_block_is_all_reasoning() {
    let text = "<think>still thinking when max_tokens hit </thi";
    assert_eq!(
        split_everywhere(false, text),
        pair("still thinking when max_tokens hit </thi", "")
    );
}

#[test]
fn detection_and_where_the_answer_starts() {
    assert_eq!(
        ReasoningFormat::detect("{{ '<think>\\n' }}"),
        Some(ReasoningFormat::Qwen3)
    );
    assert_eq!(
        ReasoningFormat::detect("<｜Assistant｜><think>\\n"),
        Some(ReasoningFormat::DeepseekR1)
    );
    assert_eq!(ReasoningFormat::detect("<|im_start|>"), None);
    let q = ReasoningFormat::Qwen3;
    assert!(q.starts_in_reasoning("<|im_start|>assistant\n<think>\n"));
    assert!(!q.starts_in_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    assert!(ReasoningFormat::DeepseekR1.starts_in_reasoning(""));
}
