//! The kernel declarations of a `.cu` source read without a compiler, macros expanded
//! (`cuda_macros`), for the host-only test that holds the signature table against them
//! (`cu_check`): each kernel's name and its parameters' names and C types.

use super::cuda_macros::{is_word_byte, parenthesized, preprocess, split_top_level};

/// A C parameter type as the launch sees it: an address, or a value of its size and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CType {
    Pointer,
    /// `int` (32 bits).
    Int,
    Float,
    /// A 64-bit integer.
    U64,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Declaration {
    pub(super) name: String,
    pub(super) params: Vec<(String, CType)>,
}

/// What one source declares.
#[derive(Debug, Default)]
pub(super) struct Declarations {
    /// Every `extern "C" __global__` kernel the source compiles, macros expanded.
    pub(super) kernels: Vec<Declaration>,
    /// The names of the kernels written inside function-like macros, each pasted macro
    /// parameter shown as `{PARAM}`: `gemv_bf16_{NT}_s{SPLIT}`.
    pub(super) templates: Vec<String>,
}

pub(super) fn read(source: &str) -> Result<Declarations, String> {
    let (macros, code) = preprocess(source);
    let mut out = Declarations::default();
    for (name, params) in raw_declarations(&macros.expand_kernels(&code)?)? {
        let params = macros.expand_objects(&params)?;
        out.kernels.push(Declaration {
            name,
            params: parse_params(&params)?,
        });
    }
    for (macro_params, body) in macros.function_like() {
        for (name, _) in raw_declarations(body)? {
            let pieces = name.split("##").map(str::trim).map(|piece| {
                if macro_params.iter().any(|p| p == piece) {
                    format!("{{{piece}}}")
                } else {
                    piece.to_string()
                }
            });
            out.templates.push(pieces.collect());
        }
    }
    Ok(out)
}

/// Each `extern "C" __global__ [void] [__launch_bounds__(..)] [void] NAME(PARAMS)` of `text`:
/// its name as written (`##` and all) and its parameter list.
fn raw_declarations(text: &str) -> Result<Vec<(String, String)>, String> {
    const OPENING: &str = "extern \"C\"";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(OPENING) {
        let mut rest = text[from + at + OPENING.len()..].trim_start();
        from += at + OPENING.len();
        let Some(after) = rest.strip_prefix("__global__") else {
            continue;
        };
        rest = after.trim_start();
        loop {
            if let Some(after) = rest.strip_prefix("void") {
                rest = after.trim_start();
            } else if let Some(after) = rest.strip_prefix("__launch_bounds__") {
                let after = after.trim_start();
                let (_, end) = parenthesized(after, 0)?;
                rest = after[end..].trim_start();
            } else {
                break;
            }
        }
        let open = rest
            .find('(')
            .ok_or_else(|| format!("a kernel without parameters: `{rest}`"))?;
        let (params, _) = parenthesized(rest, open)?;
        found.push((rest[..open].trim().to_string(), params.to_string()));
    }
    Ok(found)
}

fn parse_params(list: &str) -> Result<Vec<(String, CType)>, String> {
    if list.trim().is_empty() || list.trim() == "void" {
        return Ok(Vec::new());
    }
    split_top_level(list)
        .into_iter()
        .map(|param| {
            let param = param.trim();
            let name_len = param.bytes().rev().take_while(|&b| is_word_byte(b)).count();
            let (ty, name) = param.split_at(param.len() - name_len);
            Ok((name.to_string(), c_type(ty)?))
        })
        .collect()
}

fn c_type(ty: &str) -> Result<CType, String> {
    if ty.contains('*') {
        return Ok(CType::Pointer);
    }
    let words: Vec<&str> = ty
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__"))
        .collect();
    match words.join(" ").as_str() {
        "int" | "i32" | "int32_t" | "unsigned" | "unsigned int" | "u32" | "uint32_t" => {
            Ok(CType::Int)
        }
        "float" => Ok(CType::Float),
        "u64" | "uint64_t" | "unsigned long long" | "i64" | "int64_t" | "long long" => {
            Ok(CType::U64)
        }
        other => Err(format!("a kernel parameter of unknown type `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_are_expanded_as_the_preprocessor_would() {
        let source = r#"
#define ARGS const float* __restrict__ b, \
    int n // the count
#define ONE(NT, SPLIT) extern "C" __global__ void __launch_bounds__(256) \
    k_##NT##_s##SPLIT(const bf16* w, ARGS, u64 seed) { body(w, n); }
#define ALL(NT) ONE(NT, 1) ONE(NT, 4)
ALL(2)
/* extern "C" __global__ void commented(int x) {} */
extern "C" __global__ void __launch_bounds__(1024)
    plain(float* x, float eps) {}
"#;
        let d = read(source).unwrap();
        let names: Vec<&str> = d.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["k_2_s1", "k_2_s4", "plain"]);
        let params: Vec<(&str, CType)> = d.kernels[1]
            .params
            .iter()
            .map(|(n, t)| (n.as_str(), *t))
            .collect();
        assert_eq!(
            params,
            [
                ("w", CType::Pointer),
                ("b", CType::Pointer),
                ("n", CType::Int),
                ("seed", CType::U64)
            ]
        );
        assert_eq!(d.kernels[2].params[1], ("eps".to_string(), CType::Float));
        assert_eq!(d.templates, ["k_{NT}_s{SPLIT}"]);
    }

    #[test]
    fn unknown_types_are_an_error() {
        assert!(read("extern \"C\" __global__ void k(double x) {}").is_err());
    }
}
