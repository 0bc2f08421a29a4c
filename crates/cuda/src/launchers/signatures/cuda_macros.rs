//! The part of the C preprocessor that the kernel declarations of kernels/*.cu go through,
//! for the host-only test of the signature table (`cu_check`, through `cuda_decls`):
//! backslash continuations, comments, object-like `#define`s (e.g. rope_kv.cu's ROPE_KV_ARGS in
//! a parameter list) and function-like ones that end in kernels, with `##` pasting (e.g.
//! gemv.cu's GEMV_KERNELS(NT) -> GEMV_KERNEL(NT, SPLIT) -> `gemv_bf16_##NT##_s##SPLIT`). No
//! conditional compilation surrounds a kernel, so none is understood.

use std::collections::HashMap;

/// Deepest nesting of macros followed (the sources nest three).
const MAX_DEPTH: usize = 16;

struct Macro {
    /// `None` for an object-like macro.
    params: Option<Vec<String>>,
    body: String,
}

/// The `#define`s of a source.
pub(super) struct Macros {
    by_name: HashMap<String, Macro>,
    /// The function-like macros whose expansion declares kernels: those declaring one, and
    /// those invoking such a macro.
    kernel_macros: Vec<String>,
}

/// `source` as the compiler sees it, short of expanding macros: its `#define`s, and the rest
/// (every line that is no directive).
pub(super) fn preprocess(source: &str) -> (Macros, String) {
    // Continuations are spliced before comments are removed, as the preprocessor does.
    let text = strip_comments(&source.replace("\\\r\n", "").replace("\\\n", ""));
    let mut by_name = HashMap::new();
    let mut code = String::new();
    for line in text.lines() {
        match line.trim_start().strip_prefix('#') {
            Some(directive) => {
                if let Some((name, m)) = define(directive) {
                    by_name.insert(name, m);
                }
            }
            None => {
                code.push_str(line);
                code.push('\n');
            }
        }
    }
    let kernel_macros = kernel_macros(&by_name);
    let macros = Macros {
        by_name,
        kernel_macros,
    };
    (macros, code)
}

impl Macros {
    /// Each function-like macro's parameters and body.
    pub(super) fn function_like(&self) -> impl Iterator<Item = (&[String], &str)> {
        self.by_name
            .values()
            .filter_map(|m| Some((m.params.as_deref()?, m.body.as_str())))
    }

    /// `code` with every invocation of a kernel-declaring macro replaced by its expansion.
    pub(super) fn expand_kernels(&self, code: &str) -> Result<String, String> {
        self.expand(code, 0)
    }

    fn expand(&self, code: &str, depth: usize) -> Result<String, String> {
        if depth > MAX_DEPTH {
            return Err("macros nest too deeply".into());
        }
        let bytes = code.as_bytes();
        let mut out = String::with_capacity(code.len());
        let (mut i, mut kept) = (0, 0);
        while i < bytes.len() {
            if bytes[i] == b'"' || bytes[i] == b'\'' {
                i = skip_literal(bytes, i);
                continue;
            }
            if !is_word_byte(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            let word = &code[start..i];
            let open = i + code[i..].len() - code[i..].trim_start().len();
            let invoked = bytes.get(open) == Some(&b'(');
            if !invoked || !self.kernel_macros.iter().any(|k| k == word) {
                continue;
            }
            let Some(Macro {
                params: Some(params),
                body,
            }) = self.by_name.get(word)
            else {
                continue;
            };
            let (list, end) = parenthesized(code, open)?;
            let args: Vec<&str> = split_top_level(list).into_iter().map(str::trim).collect();
            if args.len() != params.len() {
                return Err(format!("{word} takes {} arguments: {list}", params.len()));
            }
            let substituted = map_words(body, |w| {
                let index = params.iter().position(|p| p == w)?;
                Some(args[index].to_string())
            });
            out.push_str(&code[kept..start]);
            out.push_str(&self.expand(&paste(&substituted), depth + 1)?);
            i = end;
            kept = end;
        }
        out.push_str(&code[kept..]);
        Ok(out)
    }

    /// `text` with object-like macros expanded, until none is left.
    pub(super) fn expand_objects(&self, text: &str) -> Result<String, String> {
        let mut text = text.to_string();
        for _ in 0..MAX_DEPTH {
            let expanded = map_words(&text, |w| match self.by_name.get(w) {
                Some(Macro { params: None, body }) => Some(body.clone()),
                _ => None,
            });
            if expanded == text {
                return Ok(text);
            }
            text = expanded;
        }
        Err(format!("object-like macros nest too deeply in `{text}`"))
    }
}

fn kernel_macros(macros: &HashMap<String, Macro>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    loop {
        let before = found.len();
        for (name, m) in macros {
            if m.params.is_none() || found.contains(name) {
                continue;
            }
            let mut invokes_one = false;
            map_words(&m.body, |w| {
                invokes_one |= found.iter().any(|f| f == w);
                None
            });
            if invokes_one || m.body.contains("extern \"C\"") {
                found.push(name.clone());
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

pub(super) fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The index just past the string or character literal opening at `start`.
fn skip_literal(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != quote {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(bytes.len())
}

fn strip_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut kept) = (0, 0);
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'"' | b'\'', _) => i = skip_literal(bytes, i),
            (b'/', Some(b'/')) => {
                out.push_str(&text[kept..i]);
                i = text[i..].find('\n').map_or(text.len(), |end| i + end);
                kept = i;
            }
            (b'/', Some(b'*')) => {
                out.push_str(&text[kept..i]);
                out.push(' ');
                i = text[i + 2..]
                    .find("*/")
                    .map_or(text.len(), |end| i + 2 + end + 2);
                kept = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[kept..]);
    out
}

/// A `#define` directive (given without its `#`): the macro's name and definition.
fn define(directive: &str) -> Option<(String, Macro)> {
    let rest = directive.trim_start().strip_prefix("define")?.trim_start();
    let name_len = rest.bytes().take_while(|&b| is_word_byte(b)).count();
    let (name, rest) = rest.split_at(name_len);
    // A parenthesis right after the name, without a space, makes it function-like.
    let (params, body) = match rest.strip_prefix('(') {
        Some(rest) => {
            let (list, body) = rest.split_once(')')?;
            let params = list.split(',').map(|p| p.trim().to_string()).collect();
            (Some(params), body)
        }
        None => (None, rest),
    };
    let body = body.trim().to_string();
    Some((name.to_string(), Macro { params, body }))
}

/// `text` with each word (identifier or number) outside literals replaced by `f(word)` where
/// that is `Some`.
fn map_words(text: &str, mut f: impl FnMut(&str) -> Option<String>) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut kept) = (0, 0);
    while i < bytes.len() {
        if bytes[i] == b'"' || bytes[i] == b'\'' {
            i = skip_literal(bytes, i);
        } else if is_word_byte(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            if let Some(replacement) = f(&text[start..i]) {
                out.push_str(&text[kept..start]);
                out.push_str(&replacement);
                kept = i;
            }
        } else {
            i += 1;
        }
    }
    out.push_str(&text[kept..]);
    out
}

/// The text inside the parentheses opening at `open`, and the index past the closing one.
pub(super) fn parenthesized(text: &str, open: usize) -> Result<(&str, usize), String> {
    let bytes = text.as_bytes();
    if bytes.get(open) != Some(&b'(') {
        return Err(format!("`(` expected at `{}`", &text[open..]));
    }
    let mut depth = 0;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'(' => depth += 1,
            b')' if depth == 1 => return Ok((&text[open + 1..i], i + 1)),
            b')' => depth -= 1,
            _ => {}
        }
    }
    Err(format!("unbalanced parentheses in `{}`", &text[open..]))
}

/// `list` split at the commas outside parentheses and braces.
pub(super) fn split_top_level(list: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, b) in list.bytes().enumerate() {
        match b {
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts
}

/// `a ## b` joined into `ab`.
fn paste(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("##") {
        out.push_str(rest[..at].trim_end());
        rest = rest[at + 2..].trim_start();
    }
    out.push_str(rest);
    out
}
