//! The signature table held against kernels/*.cu on the host, without a GPU: every row's
//! kernels are declared, with the parameters of the row (count, names, and kinds: address,
//! `int`, `float` or 64-bit), a family's pattern is the name its macro pastes, and every
//! kernel the sources declare has a row.

use std::any::TypeId;
use std::collections::{HashMap, HashSet};

use super::cuda_decls::{self, CType, Declaration};
use super::{Names, ParamKind, Signature, SIGNATURES};
use crate::kernel_sources::{inline_headers, HEADERS, MODULES};

/// What the C declaration of a parameter of `kind` must be.
fn c_type(kind: ParamKind) -> CType {
    match kind {
        ParamKind::Ptr | ParamKind::NullablePtr => CType::Pointer,
        ParamKind::Count | ParamKind::I32 => CType::Int,
        ParamKind::F32 => CType::Float,
        ParamKind::U64 => CType::U64,
    }
}

/// Whether `name` is `pattern` with each `{PARAM}` replaced by one or more word characters.
fn matches_pattern(name: &str, pattern: &str) -> bool {
    let Some((literal, rest)) = pattern.split_once('{') else {
        return name == pattern;
    };
    let (Some(name), Some((_, pattern))) = (name.strip_prefix(literal), rest.split_once('}'))
    else {
        return false;
    };
    let word = name
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    (1..=word).any(|len| matches_pattern(&name[len..], pattern))
}

/// How `decl` (from `module`) differs from `sig`'s parameters, if it does.
fn param_mismatch(sig: &Signature, module: &str, decl: &Declaration) -> Option<String> {
    let at = format!("{}: {} in {module}.cu", sig.rust_name, decl.name);
    if sig.params.len() != decl.params.len() {
        return Some(format!(
            "{at} takes {} parameters, the table {}",
            decl.params.len(),
            sig.params.len()
        ));
    }
    let pairs = sig.params.iter().zip(&decl.params).enumerate();
    pairs
        .filter(|(_, ((name, kind), (c_name, c)))| name != c_name || c_type(*kind) != *c)
        .map(|(i, ((name, kind), (c_name, c)))| {
            format!("{at}: parameter {i} is `{c_name}` ({c:?}), the table says `{name}` ({kind:?})")
        })
        .next()
}

/// Everything in which `signatures` and the kernels of `sources` (module name, text)
/// disagree, sorted.
fn mismatches(signatures: &[Signature], sources: &[(&str, String)]) -> Vec<String> {
    let mut errors = Vec::new();
    let mut declared: HashMap<String, (&str, Declaration)> = HashMap::new();
    let mut templates = Vec::new();
    for (module, text) in sources {
        let found = match cuda_decls::read(text) {
            Ok(found) => found,
            Err(e) => {
                errors.push(format!("reading {module}.cu: {e}"));
                continue;
            }
        };
        for kernel in found.kernels {
            if let Some((other, _)) = declared.get(&kernel.name) {
                errors.push(format!("{} is in {other}.cu and {module}.cu", kernel.name));
            }
            declared.insert(kernel.name.clone(), (module, kernel));
        }
        templates.extend(found.templates);
    }
    let mut in_table = HashSet::new();
    for sig in signatures {
        let pattern = match sig.names {
            Names::Family { pattern, .. } => Some(pattern),
            Names::One(_) | Names::Several(_) => None,
        };
        if let Some(pattern) = pattern.filter(|p| !templates.iter().any(|t| t == p)) {
            errors.push(format!(
                "{}: no .cu macro declares `{pattern}`",
                sig.rust_name
            ));
        }
        for name in sig.names.list() {
            in_table.insert(name);
            if let Some(pattern) = pattern.filter(|p| !matches_pattern(name, p)) {
                errors.push(format!("{}: {name} is not `{pattern}`", sig.rust_name));
            }
            match declared.get(name) {
                None => errors.push(format!("{}: no .cu declares {name}", sig.rust_name)),
                Some((module, decl)) => errors.extend(param_mismatch(sig, module, decl)),
            }
        }
    }
    for name in declared.keys() {
        if !in_table.contains(name.as_str()) {
            errors.push(format!("{name} has no row in the signature table"));
        }
    }
    errors.sort();
    errors
}

#[test]
fn the_table_matches_the_cuda_declarations() {
    let sources: Vec<(&str, String)> = MODULES
        .iter()
        .map(|m| (m.name, inline_headers(m.source, HEADERS).unwrap()))
        .collect();
    let errors = mismatches(SIGNATURES, &sources);
    assert!(
        errors.is_empty(),
        "the signature table (launchers/signatures.rs) disagrees with kernels/*.cu:\n{}",
        errors.join("\n")
    );
}

const SOURCE: &str = r#"
#define K(S) extern "C" __global__ void k_s##S(const float* x, int n, float eps) {}
K(1)
K(2)
extern "C" __global__ void plain(float* out, u64 seed) {}
"#;

fn instantiated() -> Vec<&'static str> {
    vec!["k_s1", "k_s2"]
}

fn one_too_many() -> Vec<&'static str> {
    vec!["k_s1", "k_s2", "k_s3"]
}

const RIGHT: [Signature; 2] = [
    Signature {
        rust_name: "K",
        names: Names::Family {
            pattern: "k_s{S}",
            names: instantiated,
        },
        params: &[
            ("x", ParamKind::Ptr),
            ("n", ParamKind::Count),
            ("eps", ParamKind::F32),
        ],
        struct_type: TypeId::of::<()>,
    },
    Signature {
        rust_name: "Plain",
        names: Names::One("plain"),
        params: &[("out", ParamKind::NullablePtr), ("seed", ParamKind::U64)],
        struct_type: TypeId::of::<()>,
    },
];

fn check(signatures: &[Signature]) -> Vec<String> {
    mismatches(signatures, &[("test", SOURCE.to_string())])
}

#[test]
fn each_kind_of_disagreement_is_caught() {
    assert_eq!(check(&RIGHT), Vec::<String>::new());
    let wrong = |edit: &dyn Fn(&mut [Signature; 2])| {
        let mut table = RIGHT;
        edit(&mut table);
        check(&table)
    };
    let swapped = wrong(&|t| {
        t[0].params = &[
            ("n", ParamKind::Count),
            ("x", ParamKind::Ptr),
            ("eps", ParamKind::F32),
        ]
    });
    assert_eq!(swapped.len(), 2, "{swapped:?}"); // both instantiations
    assert!(swapped[0].contains("parameter 0 is `x`"), "{swapped:?}");
    let kind = wrong(&|t| t[1].params = &[("out", ParamKind::Ptr), ("seed", ParamKind::F32)]);
    assert!(kind[0].contains("parameter 1 is `seed` (U64)"), "{kind:?}");
    let count = wrong(&|t| t[1].params = &[("out", ParamKind::Ptr)]);
    assert!(
        count[0].contains("takes 2 parameters, the table 1"),
        "{count:?}"
    );
    let pattern = wrong(&|t| {
        t[0].names = Names::Family {
            pattern: "k_t{S}",
            names: instantiated,
        }
    });
    assert!(
        pattern.iter().any(|e| e.contains("no .cu macro declares")),
        "{pattern:?}"
    );
    assert!(
        pattern.iter().any(|e| e.contains("k_s1 is not `k_t{S}`")),
        "{pattern:?}"
    );
    let list = wrong(&|t| {
        t[0].names = Names::Family {
            pattern: "k_s{S}",
            names: one_too_many,
        }
    });
    assert_eq!(list, ["K: no .cu declares k_s3"]);
    let name = wrong(&|t| t[1].names = Names::One("plane"));
    assert_eq!(
        name,
        [
            "Plain: no .cu declares plane",
            "plain has no row in the signature table"
        ]
    );
}

#[test]
fn patterns_stand_for_whole_words() {
    assert!(matches_pattern(
        "qgemv_q4_k_8_s2",
        "qgemv_{NAME}_{NT}_s{SPLIT}"
    ));
    assert!(matches_pattern("gemv_bf16_1_s1", "gemv_bf16_{NT}_s{SPLIT}"));
    assert!(!matches_pattern("gemv_bf16__s1", "gemv_bf16_{NT}_s{SPLIT}"));
    assert!(!matches_pattern("gemv_bf16_1_s1x", "gemv_bf16_{NT}_s1"));
    assert!(!matches_pattern("gemv_bf16_1", "gemv_bf16_{NT}_s{SPLIT}"));
}
