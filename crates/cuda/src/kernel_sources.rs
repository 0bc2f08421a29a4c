//! The CUDA C++ kernels embedded in the binary: their sources always, and the sm_90 cubins
//! that build.rs compiled when nvcc was found. Without a cubin, a module is compiled at run time
//! by NVRTC from its source with the local headers inlined (NVRTC does not see our files).

/// One kernels/*.cu file.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// The file stem, e.g. `attention_decode`.
    pub name: &'static str,
    pub source: &'static str,
    /// Compiled by nvcc at build time, when it was available.
    pub cubin: Option<&'static [u8]>,
}

include!(concat!(env!("OUT_DIR"), "/kernel_sources.rs"));

/// Whether build.rs embedded nvcc-compiled cubins (otherwise NVRTC runs at start-up).
pub fn has_prebuilt_cubins() -> bool {
    MODULES.iter().all(|m| m.cubin.is_some())
}

/// `source` with every `#include "name.cuh"` of a known header replaced by that header's
/// text, recursively, each header at most once (they all `#pragma once`). System includes
/// (`<cuda_bf16.h>`) stay for NVRTC's include path.
pub fn inline_headers(source: &str, headers: &[(&str, &str)]) -> Result<String, String> {
    fn walk(
        source: &str,
        headers: &[(&str, &str)],
        seen: &mut Vec<String>,
        out: &mut String,
    ) -> Result<(), String> {
        for line in source.lines() {
            let trimmed = line.trim_start();
            let quoted = trimmed
                .strip_prefix("#include")
                .map(str::trim)
                .and_then(|rest| rest.strip_prefix('"'))
                .and_then(|rest| rest.split('"').next());
            match quoted {
                Some(name) => {
                    let text = headers
                        .iter()
                        .find(|(h, _)| *h == name)
                        .map(|(_, text)| *text)
                        .ok_or_else(|| format!("unknown header \"{name}\""))?;
                    if !seen.iter().any(|s| s == name) {
                        seen.push(name.to_string());
                        walk(text, headers, seen, out)?;
                    }
                }
                None if trimmed.starts_with("#pragma once") => {}
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        Ok(())
    }
    let mut out = String::with_capacity(source.len() * 2);
    walk(source, headers, &mut Vec::new(), &mut out)?;
    Ok(out)
}

/// File name of the NVRTC result for `source` compiled for `arch` with `options`: a hash of
/// all three, so any change to a kernel or its flags misses the cache.
pub fn cache_file_name(source: &str, arch: &str, options: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(arch.as_bytes());
    for option in options {
        hash.update([0]);
        hash.update(option.as_bytes());
    }
    hash.update([0]);
    hash.update(source.as_bytes());
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.ptx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_inlines_to_a_self_contained_source() {
        for module in MODULES {
            let text = inline_headers(module.source, HEADERS).unwrap();
            assert!(!text.contains("#include \""), "{}", module.name);
            assert!(text.contains("#include <cuda_bf16.h>"), "{}", module.name);
            assert!(text.contains("extern \"C\" __global__"), "{}", module.name);
            // common.cuh arrives once even where philox.cuh includes it too.
            assert_eq!(text.matches("union Pack8").count(), 1, "{}", module.name);
        }
        assert!(MODULES.len() >= 8);
    }

    #[test]
    fn unknown_headers_are_an_error_and_nesting_is_followed() {
        let headers = [
            ("a.cuh", "#pragma once\n#include \"b.cuh\"\nint a;"),
            ("b.cuh", "int b;"),
        ];
        let text = inline_headers(
            "#include \"a.cuh\"\n#include \"a.cuh\"\nint main;",
            &headers,
        )
        .unwrap();
        assert_eq!(text, "int b;\nint a;\nint main;\n");
        assert!(inline_headers("#include \"missing.cuh\"", &headers).is_err());
    }

    #[test]
    fn cache_names_change_with_source_arch_and_options() {
        let base = cache_file_name("x", "compute_90", &[]);
        assert_eq!(base, cache_file_name("x", "compute_90", &[]));
        assert_ne!(base, cache_file_name("y", "compute_90", &[]));
        assert_ne!(base, cache_file_name("x", "compute_80", &[]));
        assert_ne!(base, cache_file_name("x", "compute_90", &["-O3".into()]));
        assert!(base.ends_with(".ptx") && base.len() == 36);
    }
}
