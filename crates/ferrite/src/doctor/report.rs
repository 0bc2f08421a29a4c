//! What `ferrite doctor` prints: one line per check (or one JSON object with `--json`), and
//! the exit status scripts read.

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Serving works, but something is likely to surprise: exit status 0.
    Warning,
    /// Serving fails or answers wrongly: exit status 1.
    Error,
    /// Not run because an earlier check failed (that check is the error to fix).
    Skipped,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// Short and stable, for scripts: `chat template`, `stop ids`, `memory`, ...
    pub name: &'static str,
    pub status: Status,
    /// What was found, on one line.
    pub message: String,
    /// What to do about it, when the status is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub fn ok(name: &'static str, message: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    pub fn warning(
        name: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status: Status::Warning,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn error(name: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Error,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn skipped(name: &'static str, why: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Skipped,
            message: why.into(),
            fix: None,
        }
    }

    /// `status  name  message; fix: ...`, on one line whatever the message holds.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{:<8} {:<16} {}",
            self.status.label(),
            self.name,
            one_line(&self.message)
        );
        if let Some(fix) = &self.fix {
            line.push_str(" -- fix: ");
            line.push_str(&one_line(fix));
        }
        line
    }
}

/// Newlines (an error's chain, a template's text) folded into spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every check of a run, in the order they ran.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub model: String,
    pub device: String,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// Whether any check is an error: exit status 1.
    pub fn failed(&self) -> bool {
        self.count(Status::Error) > 0
    }

    /// The lines for people: a header, a line per check, a summary.
    pub fn text(&self) -> String {
        let mut out = format!("ferrite doctor: {} on {}\n", self.model, self.device);
        for check in &self.checks {
            out.push_str(&check.line());
            out.push('\n');
        }
        let (errors, warnings) = (self.count(Status::Error), self.count(Status::Warning));
        out.push_str(&format!(
            "{errors} error{}, {warnings} warning{}\n",
            plural(errors),
            plural(warnings)
        ));
        out
    }

    pub fn json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_status_check_and_fix_on_one_line() {
        let c = Check::error(
            "vocabulary",
            "the tokenizer\nhas 5 ids",
            "use the right one",
        );
        assert_eq!(
            c.line(),
            "error    vocabulary       the tokenizer has 5 ids -- fix: use the right one"
        );
        assert_eq!(
            Check::ok("memory", "fits").line(),
            "ok       memory           fits"
        );
    }

    #[test]
    fn warnings_alone_do_not_fail_the_run() {
        let mut report = Report {
            model: "m".into(),
            device: "cpu".into(),
            checks: vec![Check::ok("a", "x"), Check::warning("b", "y", "z")],
        };
        assert!(!report.failed());
        assert!(report.text().ends_with("0 errors, 1 warning\n"));
        report.checks.push(Check::error("c", "broken", "mend it"));
        assert!(report.failed());
    }

    #[test]
    fn json_has_every_check_and_leaves_out_an_absent_fix() {
        let report = Report {
            model: "m".into(),
            device: "cpu".into(),
            checks: vec![Check::ok("a", "x"), Check::warning("b", "y", "z")],
        };
        let v: serde_json::Value = serde_json::from_str(&report.json().unwrap()).unwrap();
        assert_eq!(v["checks"][0]["status"], "ok");
        assert!(v["checks"][0].get("fix").is_none());
        assert_eq!(v["checks"][1]["fix"], "z");
    }
}
