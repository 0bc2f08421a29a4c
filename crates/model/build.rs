//! Builds the model-family registry from the files in `src/arch/families/`: each file becomes a
//! module and its `FAMILIES` join the registry, so adding a family is adding one file. A file
//! whose first line is an inner `#![cfg(...)]` (a test-only family) is registered under the
//! same condition.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("src/arch/families");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();

    let mut modules = String::new();
    let mut pushes = String::new();
    for path in &files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("family file names are UTF-8");
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Only the file's first line: a `#![cfg(...)]` anywhere else is not the module's.
        let condition = text
            .lines()
            .next()
            .map(str::trim)
            .and_then(|line| line.strip_prefix("#![cfg(")?.strip_suffix(")]"));
        let cfg = condition
            .map(|c| format!("#[cfg({c})]\n"))
            .unwrap_or_default();
        writeln!(
            modules,
            "#[path = {:?}]\nmod {stem};",
            path.display().to_string()
        )
        .unwrap();
        writeln!(
            pushes,
            "    {cfg}families.extend_from_slice({stem}::FAMILIES);"
        )
        .unwrap();
    }
    let generated = format!(
        "{modules}\n/// Every family, in the order of their files' names.\n\
         pub(crate) fn all() -> Vec<&'static dyn super::Family> {{\n    \
         #[allow(unused_mut)]\n    let mut families: Vec<&'static dyn super::Family> = Vec::new();\n\
         {pushes}    families\n}}\n"
    );
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("families.rs");
    std::fs::write(&out, generated).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
