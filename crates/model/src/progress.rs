//! A progress bar per file downloaded (or read, `FileProgress::reading`): indicatif's bar when
//! stderr is a terminal, otherwise (logs, CI, pipes, where a redrawn bar is noise) a plain line
//! at every tenth of a large file and one when a file is done.

use std::io::{IsTerminal, Write};

use hf_hub::api::Progress;
use indicatif::{HumanBytes, ProgressBar};

pub enum FileProgress {
    Bar(ProgressBar),
    Lines(LineProgress),
}

impl FileProgress {
    pub fn for_stderr() -> FileProgress {
        Self::doing("downloading")
    }

    /// Progress of reading a file from disk into memory.
    pub fn reading() -> FileProgress {
        Self::doing("reading")
    }

    fn doing(action: &'static str) -> FileProgress {
        if std::io::stderr().is_terminal() {
            FileProgress::Bar(ProgressBar::new(0))
        } else {
            FileProgress::Lines(LineProgress {
                action,
                ..LineProgress::default()
            })
        }
    }
}

impl Progress for FileProgress {
    fn init(&mut self, size: usize, filename: &str) {
        match self {
            FileProgress::Bar(bar) => {
                // hf-hub calls init again when it resumes: start the bar over, the caller
                // then reports the bytes already there.
                bar.reset();
                Progress::init(bar, size, filename)
            }
            FileProgress::Lines(lines) => lines.init(size, filename),
        }
    }

    fn update(&mut self, size: usize) {
        match self {
            FileProgress::Bar(bar) => Progress::update(bar, size),
            FileProgress::Lines(lines) => lines.update(size),
        }
    }

    fn finish(&mut self) {
        match self {
            FileProgress::Bar(bar) => Progress::finish(bar),
            FileProgress::Lines(lines) => lines.finish(),
        }
    }
}

/// Files below this get only their final line.
const LINES_PER_TENTH_FROM: usize = 16 << 20;

#[derive(Default)]
pub struct LineProgress {
    /// What is done to the file ("downloading").
    action: &'static str,
    file: String,
    total: usize,
    done: usize,
    /// Tenths of the file already reported.
    reported: usize,
}

impl LineProgress {
    fn line(&self) -> String {
        let percent = (self.done * 100).checked_div(self.total).unwrap_or(100);
        format!(
            "{} {}: {percent:>3}% ({} / {})",
            self.action,
            self.file,
            HumanBytes(self.done as u64),
            HumanBytes(self.total as u64)
        )
    }

    fn print(&self) {
        let _ = writeln!(std::io::stderr().lock(), "{}", self.line());
    }
}

impl Progress for LineProgress {
    fn init(&mut self, size: usize, filename: &str) {
        // hf-hub starts a file over only after a broken transfer: say so, it resumes there.
        if self.file == filename && self.done > 0 && self.done < self.total {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{} {filename}: transfer broken at {}, resuming",
                self.action,
                HumanBytes(self.done as u64)
            );
        }
        self.file = filename.to_string();
        self.total = size;
        self.done = 0;
        self.reported = 0;
    }

    fn update(&mut self, size: usize) {
        self.done += size;
        let tenths = (self.done * 10).checked_div(self.total).unwrap_or(10);
        if tenths > self.reported && tenths < 10 && self.total >= LINES_PER_TENTH_FROM {
            self.reported = tenths;
            self.print();
        }
    }

    fn finish(&mut self) {
        if self.reported < 10 {
            self.reported = 10;
            self.print();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_download_reports_from_the_bytes_already_there() {
        let mut p = LineProgress {
            action: "downloading",
            ..LineProgress::default()
        };
        let size = 100 << 20;
        p.init(size, "model.safetensors");
        p.update(size * 45 / 100);
        assert_eq!(p.reported, 4);
        // hf-hub resumes: init again, then the bytes already on disk.
        p.init(size, "model.safetensors");
        p.update(size * 45 / 100);
        p.update(size - size * 45 / 100);
        assert_eq!(p.done, size);
        assert!(p.line().contains("100%"), "{}", p.line());
        p.finish();
        assert_eq!(p.reported, 10);
    }

    #[test]
    fn a_small_file_gets_one_line() {
        let mut p = LineProgress::default();
        p.init(2000, "tokenizer.json");
        p.update(1000);
        assert_eq!(p.reported, 0);
        p.update(1000);
        p.finish();
        assert_eq!(p.reported, 10);
    }
}
