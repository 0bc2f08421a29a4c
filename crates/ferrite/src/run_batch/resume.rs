//! Resuming: which requests an existing output file holds results for. Its complete lines are
//! kept; a partial last line (a run killed mid-write) is cut off so that appending starts on a
//! fresh line. With `--retry-failed` the results of failed requests are taken out instead of
//! kept, so that their requests run again.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::input::Done;

/// What resuming reads of a result line.
#[derive(Deserialize)]
struct DoneLine {
    /// Every result line has one: a file of other lines (the input, say) is refused.
    #[serde(rename = "id")]
    _id: IgnoredAny,
    custom_id: Option<String>,
    response: Option<DoneResponse>,
    error: Option<DoneError>,
}

#[derive(Deserialize)]
struct DoneResponse {
    status_code: u16,
}

#[derive(Deserialize)]
struct DoneError {
    line: Option<usize>,
}

impl DoneLine {
    /// A line refused before sending, or an answer other than 200.
    fn failed(&self) -> bool {
        self.error.is_some() || self.response.as_ref().is_none_or(|r| r.status_code != 200)
    }
}

/// The output file, opened for appending, and what it holds.
pub struct Resumed {
    pub file: File,
    pub done: Done,
    /// Failed results taken out of the file (`--retry-failed`): their requests run again.
    pub retried: usize,
}

/// Opens `path` for appending (created if absent) and reads what it holds; with
/// `retry_failed`, first rewrites it without the lines of failed requests.
pub fn open(path: &Path, retry_failed: bool) -> anyhow::Result<Resumed> {
    let name = path.display().to_string();
    let mut done = Done::default();
    let mut retried = 0;
    if path.exists() {
        let scan = read_done(path, &mut done, retry_failed)?;
        if scan.failed > 0 {
            rewrite_without_failures(path)?;
            retried = scan.failed;
        } else {
            let file = OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {name}"))?;
            if file.metadata()?.len() > scan.complete {
                tracing::warn!("{name}: dropping a partial last line (an interrupted run's)");
                file.set_len(scan.complete)?;
            }
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {name}"))?;
    Ok(Resumed {
        file,
        done,
        retried,
    })
}

struct Scan {
    /// Bytes the complete lines take.
    complete: u64,
    /// Failed results left out of `done` (only counted when retrying them).
    failed: usize,
}

/// Fills `done` from the complete lines (leaving failed results out when `retry_failed`).
fn read_done(path: &Path, done: &mut Done, retry_failed: bool) -> anyhow::Result<Scan> {
    let mut scan = Scan {
        complete: 0,
        failed: 0,
    };
    for_each_complete_line(path, |number, raw| {
        scan.complete += raw.len() as u64;
        let Some(line) = parse(path, number, raw)? else {
            return Ok(());
        };
        if retry_failed && line.failed() {
            scan.failed += 1;
            return Ok(());
        }
        match (line.custom_id, line.error.and_then(|e| e.line)) {
            (Some(id), _) => {
                done.custom_ids.insert(id);
            }
            (None, Some(input_line)) => {
                done.lines.insert(input_line);
            }
            (None, None) => {}
        }
        Ok(())
    })?;
    Ok(scan)
}

/// Replaces `path` by its complete lines less the failed results (a partial last line goes
/// too): written to a file beside it and renamed over it, so that a run killed meanwhile
/// leaves the old file whole.
fn rewrite_without_failures(path: &Path) -> anyhow::Result<()> {
    let temporary = temporary_path(path);
    let name = temporary.display().to_string();
    let mut out =
        BufWriter::new(File::create(&temporary).with_context(|| format!("creating {name}"))?);
    for_each_complete_line(path, |number, raw| {
        if parse(path, number, raw)?.is_none_or(|line| !line.failed()) {
            out.write_all(raw)
                .with_context(|| format!("writing {name}"))?;
        }
        Ok(())
    })?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("renaming {name} to {}", path.display()))
}

fn temporary_path(path: &Path) -> PathBuf {
    let file_name = path
        .file_name()
        .map_or_else(|| "results".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{file_name}.retry-failed.tmp"))
}

/// A result line, or `None` for a blank one.
fn parse(path: &Path, number: usize, raw: &[u8]) -> anyhow::Result<Option<DoneLine>> {
    if raw.trim_ascii().is_empty() {
        return Ok(None);
    }
    match serde_json::from_slice::<DoneLine>(raw) {
        Ok(line) => Ok(Some(line)),
        Err(_) => bail!(
            "{} line {number} is not a batch result line: not appending to this file",
            path.display()
        ),
    }
}

/// Calls `f` with each complete line (its newline included) and its 1-based number; a last
/// line without a newline is left out.
fn for_each_complete_line(
    path: &Path,
    mut f: impl FnMut(usize, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let name = path.display();
    let mut reader = BufReader::new(File::open(path).with_context(|| format!("opening {name}"))?);
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading {name}"))?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok(());
        }
        number += 1;
        f(number, &buf)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ferrite-resume-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("out.jsonl")
    }

    #[test]
    fn complete_lines_are_done_and_a_partial_last_line_is_cut() {
        let path = scratch("partial");
        let a = r#"{"id":"x","custom_id":"a","response":{"status_code":200},"error":null}"#;
        let bad = r#"{"id":"y","custom_id":null,"response":null,"error":{"code":"c","line":4}}"#;
        std::fs::write(
            &path,
            format!("{a}\n{bad}\n{{\"id\":\"z\",\"custom_id\":\"b"),
        )
        .unwrap();
        let r = open(&path, false).unwrap();
        assert!(r.done.custom_ids.contains("a") && !r.done.custom_ids.contains("b"));
        assert_eq!(r.done.lines.iter().copied().collect::<Vec<_>>(), vec![4]);
        assert_eq!(r.retried, 0);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{a}\n{bad}\n")
        );

        std::fs::write(&path, "not json\n").unwrap();
        assert!(open(&path, false).is_err());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn retry_failed_takes_out_error_lines_and_non_200_answers_only() {
        let path = scratch("retry");
        let ok = r#"{"id":"1","custom_id":"ok","response":{"status_code":200},"error":null}"#;
        let e400 = r#"{"id":"2","custom_id":"bad","response":{"status_code":400},"error":null}"#;
        let refused = r#"{"id":"3","custom_id":"u","response":null,"error":{"code":"c","line":3}}"#;
        let no_id = r#"{"id":"4","custom_id":null,"response":null,"error":{"code":"c","line":9}}"#;
        let ok2 = r#"{"id":"5","custom_id":"ok2","response":{"status_code":200},"error":null}"#;
        let text = format!("{ok}\n{e400}\n{refused}\n{no_id}\n{ok2}\n{{\"id\":\"6\"");
        std::fs::write(&path, &text).unwrap();

        // Without the flag every complete line is done.
        let r = open(&path, false).unwrap();
        assert_eq!(r.done.custom_ids.len(), 4);
        assert_eq!(r.done.lines.len(), 1);

        std::fs::write(&path, &text).unwrap();
        let r = open(&path, true).unwrap();
        assert_eq!(r.retried, 3);
        let mut ids: Vec<_> = r.done.custom_ids.iter().cloned().collect();
        ids.sort();
        assert_eq!(ids, ["ok", "ok2"]);
        assert!(r.done.lines.is_empty());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{ok}\n{ok2}\n")
        );
        assert!(!temporary_path(&path).exists());
        // Nothing failed is left: a second retry changes nothing.
        assert_eq!(open(&path, true).unwrap().retried, 0);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
