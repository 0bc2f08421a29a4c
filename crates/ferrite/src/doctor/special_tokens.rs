//! The special tokens check: bos, eos and every token the chat template writes encode as one
//! id each (their own), as they must for the model to see them as it was trained; a
//! `<|name|>` the template writes that the tokenizer does not have is found too.

use tokenizers::Tokenizer;

use super::report::Check;

const NAME: &str = "special tokens";

/// The tokens to check: bos and eos by role, the tokenizer's added tokens that the template's
/// source or its rendered conversation contain, and `<|...|>` pieces of the rendered text.
pub fn candidates(
    tokenizer: &Tokenizer,
    bos: Option<&str>,
    eos: Option<&str>,
    template: Option<&str>,
    rendered: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |t: &str| {
        if !t.is_empty() && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    };
    bos.into_iter().chain(eos).for_each(&mut add);
    let texts: Vec<&str> = template.into_iter().chain(rendered).collect();
    let mut added: Vec<(u32, String)> = tokenizer
        .get_added_tokens_decoder()
        .into_iter()
        .map(|(id, t)| (id, t.content))
        .collect();
    added.sort();
    for (_, content) in &added {
        if texts.iter().any(|t| t.contains(content.as_str())) {
            add(content);
        }
    }
    if let Some(text) = rendered {
        bar_tokens(text).into_iter().for_each(&mut add);
    }
    out
}

/// The `<|name|>` pieces of `text` (no whitespace inside, at most 64 characters): the form
/// most chat formats give their control tokens.
pub fn bar_tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<|") {
        let after = &rest[start + 2..];
        match after.find("|>") {
            Some(end) if end <= 64 && !after[..end].contains(char::is_whitespace) => {
                out.push(&rest[start..start + 2 + end + 2]);
                rest = &after[end + 2..];
            }
            _ => rest = after,
        }
    }
    out
}

/// A token as the report shows it: quoted when it holds whitespace (Gemma's `"\n"`).
fn shown(token: &str) -> String {
    if token.contains(|c: char| c.is_whitespace() || c.is_control()) {
        format!("{token:?}")
    } else {
        token.to_string()
    }
}

pub fn check(tokenizer: &Tokenizer, tokens: &[String]) -> Check {
    let mut problems = Vec::new();
    let mut fine = Vec::new();
    for text in tokens {
        let token = shown(text);
        let text = text.as_str();
        let own = tokenizer.token_to_id(text);
        let ids = match tokenizer.encode(text, false) {
            Ok(e) => e.get_ids().to_vec(),
            Err(e) => {
                problems.push(format!("{token} cannot be tokenized: {e}"));
                continue;
            }
        };
        match own {
            None => problems.push(format!(
                "{token} is not a token of the tokenizer: it encodes as {} ids {ids:?}",
                ids.len()
            )),
            Some(id) if ids == [id] => fine.push(format!("{token} {id}")),
            Some(id) => problems.push(format!(
                "{token} (id {id}) encodes as {} ids {ids:?}",
                ids.len()
            )),
        }
    }
    if !problems.is_empty() {
        return Check::error(
            NAME,
            problems.join("; "),
            "make each one token: list it in tokenizer.json's added_tokens with \"special\": \
             true (a GGUF's tokenizer.ggml.token_type 3, control), or correct the template's \
             or tokenizer_config.json's spelling of it",
        );
    }
    if fine.is_empty() {
        return Check::ok(NAME, "no bos, eos or template tokens to check");
    }
    let shown = if fine.len() > 8 {
        format!("{}, ... ({} in all)", fine[..8].join(", "), fine.len())
    } else {
        fine.join(", ")
    };
    Check::ok(NAME, format!("one id each: {shown}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_with_whitespace_are_shown_quoted() {
        assert_eq!(shown("<|im_end|>"), "<|im_end|>");
        assert_eq!(shown("\n"), "\"\\n\"");
    }

    #[test]
    fn bar_tokens_are_found_in_text() {
        let text = "<|im_start|>user\nhi<|im_end|>\n<| not one |> a|b <|eot_id|>";
        assert_eq!(
            bar_tokens(text),
            vec!["<|im_start|>", "<|im_end|>", "<|eot_id|>"]
        );
        assert!(bar_tokens("no tokens <| here").is_empty());
    }

    fn chatml_tokenizer() -> Tokenizer {
        use tokenizers::models::wordlevel::WordLevel;
        use tokenizers::pre_tokenizers::whitespace::Whitespace;
        use tokenizers::AddedToken;
        let vocab = [
            ("[UNK]", 0),
            ("hi", 1),
            ("<", 2),
            ("|", 3),
            (">", 4),
            ("im_start", 5),
        ]
        .into_iter()
        .map(|(t, i)| (t.to_string(), i))
        .collect();
        let model = WordLevel::builder()
            .vocab(vocab)
            .unk_token("[UNK]".into())
            .build()
            .unwrap();
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_pre_tokenizer(Some(Whitespace {}));
        tokenizer.add_special_tokens(&[AddedToken::from("<|im_end|>", true)]);
        tokenizer
    }

    #[test]
    fn a_declared_token_passes_and_an_undeclared_one_is_named() {
        let tok = chatml_tokenizer();
        let rendered = "<|im_start|> hi <|im_end|>";
        let found = candidates(&tok, None, Some("<|im_end|>"), None, Some(rendered));
        assert_eq!(found, vec!["<|im_end|>", "<|im_start|>"]);
        let c = check(&tok, &found);
        assert_eq!(c.status, super::super::report::Status::Error);
        assert!(
            c.message
                .contains("<|im_start|> is not a token of the tokenizer"),
            "{}",
            c.message
        );
        assert!(!c.message.contains("<|im_end|>"), "{}", c.message);
        let ok = check(&tok, &["<|im_end|>".to_string()]);
        assert_eq!(ok.status, super::super::report::Status::Ok);
        assert!(ok.message.contains("<|im_end|> 6"), "{}", ok.message);
    }
}
