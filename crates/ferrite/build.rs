//! Records the git commit the binary is built from (`ferrite --version`), so that a bug report
//! names the exact source: $FERRITE_GIT_COMMIT when set (an image build, which has no .git),
//! else git's HEAD, else "unknown" (a source tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // A build without the repository's .git (an image build copies only the sources) is told
    // the commit instead (deploy/docker/Dockerfile.*).
    println!("cargo:rerun-if-env-changed=FERRITE_GIT_COMMIT");
    let commit = std::env::var("FERRITE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FERRITE_GIT_COMMIT={commit}");
    // A new commit or checkout moves HEAD or the ref it names (no watch on the work tree:
    // uncommitted edits would rebuild on every `git status`).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "packed-refs"] {
            println!("cargo:rerun-if-changed={dir}/{file}");
        }
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head_ref}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
