//! llama-server's two code-completion stops, on the text generated so far: `n_indent` (a new
//! line indented less than the cursor's ends the completion, cut before that line's first
//! visible character) and `t_max_predict_ms` (past the time limit, the completion ends at the
//! next new line, which it keeps). Both are checked after every piece of text the engine
//! sends, as llama-server checks after every token.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct EarlyStop {
    n_indent: usize,
    deadline: Option<Duration>,
    started: Option<Instant>,
    /// Where the line after the last new line seen starts (0: none seen yet).
    line_start: usize,
    /// Bytes of text already checked.
    seen: usize,
}

/// Why the completion ended early, and where its text ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `n_indent`: the text is cut to this many bytes.
    Indent(usize),
    /// `t_max_predict_ms`.
    Timeout,
}

impl EarlyStop {
    pub fn new(n_indent: usize, t_max_predict_ms: Option<u64>) -> Self {
        Self {
            n_indent,
            deadline: t_max_predict_ms.map(Duration::from_millis),
            started: None,
            line_start: 0,
            seen: 0,
        }
    }

    /// After new text: `text` is everything generated so far, `now` the time it came.
    pub fn check(&mut self, text: &str, now: Instant) -> Option<Stopped> {
        let started = *self.started.get_or_insert(now);
        let new_text = text.get(self.seen..).unwrap_or("");
        self.seen = text.len();
        if let Some(deadline) = self.deadline {
            if new_text.contains('\n') && now.duration_since(started) > deadline {
                return Some(Stopped::Timeout);
            }
        }
        if self.n_indent == 0 {
            return None;
        }
        if self.line_start > 0 {
            let line = &text.as_bytes()[self.line_start.min(text.len())..];
            let indent = line
                .iter()
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count();
            if indent < line.len() && indent < self.n_indent {
                return Some(Stopped::Indent(self.line_start + indent));
            }
        }
        if let Some(i) = text.get(self.line_start..).and_then(|rest| rest.find('\n')) {
            self.line_start += i + 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_indented_less_than_asked_is_cut_at_its_first_visible_character() {
        let now = Instant::now();
        let mut stop = EarlyStop::new(4, None);
        let mut text = String::new();
        let mut result = None;
        for piece in ["x = 1", "\n    y", " = 2\n", "    z\n", "return"] {
            text.push_str(piece);
            result = stop.check(&text, now);
            if result.is_some() {
                break;
            }
        }
        // "return" starts a line indented 0 < 4: the text keeps everything before it.
        let Some(Stopped::Indent(end)) = result else {
            panic!("no stop: {result:?}")
        };
        assert_eq!(&text[..end], "x = 1\n    y = 2\n    z\n");
        // An indented line, or one of spaces only so far, goes on.
        let mut stop = EarlyStop::new(4, None);
        assert_eq!(stop.check("a\n", now), None);
        assert_eq!(stop.check("a\n  ", now), None);
        assert_eq!(stop.check("a\n      b", now), None);
    }

    #[test]
    fn past_the_deadline_the_completion_ends_at_the_next_new_line() {
        let start = Instant::now();
        let later = start + Duration::from_millis(50);
        let mut stop = EarlyStop::new(0, Some(10));
        assert_eq!(stop.check("a\n", start), None);
        // Late, but no new line in the new text yet.
        assert_eq!(stop.check("a\nb", later), None);
        assert_eq!(stop.check("a\nb\n", later), Some(Stopped::Timeout));
    }
}
