//! Resuming: which requests an existing output file holds results for. Its complete lines are
//! kept; a partial last line (a run killed mid-write) is cut off so that appending starts on a
//! fresh line.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::Path;

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
    error: Option<DoneError>,
}

#[derive(Deserialize)]
struct DoneError {
    line: Option<usize>,
}

/// Opens `path` for appending (created if absent) and reads what it holds.
pub fn open(path: &Path) -> anyhow::Result<(File, Done)> {
    let name = path.display().to_string();
    let mut done = Done::default();
    if path.exists() {
        let complete = read_done(path, &mut done)?;
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("opening {name}"))?;
        if file.metadata()?.len() > complete {
            tracing::warn!("{name}: dropping a partial last line (an interrupted run's)");
            file.set_len(complete)?;
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {name}"))?;
    Ok((file, done))
}

/// Fills `done` from the complete lines and returns the bytes they take.
fn read_done(path: &Path, done: &mut Done) -> anyhow::Result<u64> {
    let name = path.display();
    let mut reader = BufReader::new(File::open(path).with_context(|| format!("opening {name}"))?);
    let mut buf = Vec::new();
    let (mut complete, mut number) = (0u64, 0usize);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok(complete);
        }
        number += 1;
        complete += n as u64;
        if buf.trim_ascii().is_empty() {
            continue;
        }
        let Ok(line) = serde_json::from_slice::<DoneLine>(&buf) else {
            bail!("{name} line {number} is not a batch result line: not appending to this file");
        };
        match (line.custom_id, line.error.and_then(|e| e.line)) {
            (Some(id), _) => {
                done.custom_ids.insert(id);
            }
            (None, Some(input_line)) => {
                done.lines.insert(input_line);
            }
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_lines_are_done_and_a_partial_last_line_is_cut() {
        let dir = std::env::temp_dir().join(format!("ferrite-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        let a = r#"{"id":"x","custom_id":"a","response":{"status_code":200},"error":null}"#;
        let bad = r#"{"id":"y","custom_id":null,"response":null,"error":{"code":"c","line":4}}"#;
        std::fs::write(
            &path,
            format!("{a}\n{bad}\n{{\"id\":\"z\",\"custom_id\":\"b"),
        )
        .unwrap();
        let (_file, done) = open(&path).unwrap();
        assert!(done.custom_ids.contains("a") && !done.custom_ids.contains("b"));
        assert_eq!(done.lines.iter().copied().collect::<Vec<_>>(), vec![4]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{a}\n{bad}\n")
        );

        std::fs::write(&path, "not json\n").unwrap();
        assert!(open(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
