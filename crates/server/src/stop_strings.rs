//! Stop strings matched across token boundaries and never streamed.
//!
//! Text is released only once it cannot be the start of a stop string: the longest tail that is
//! a prefix of some stop string is held back until the next chunk decides it.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCheck {
    /// Safe to send; generation goes on.
    Continue(String),
    /// A stop string matched: send this (the text before it) and finish.
    Stopped(String),
}

#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    pub fn push(&mut self, text: &str) -> StopCheck {
        if self.stops.is_empty() {
            return StopCheck::Continue(text.to_string());
        }
        self.held.push_str(text);
        let first_match = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first_match {
            let before = self.held[..at].to_string();
            self.held.clear();
            return StopCheck::Stopped(before);
        }
        let keep = self.longest_tail_starting_a_stop();
        let release = self.held.len() - keep;
        let out = self.held[..release].to_string();
        self.held.drain(..release);
        StopCheck::Continue(out)
    }

    /// The generation ended for another reason: what was held back is plain text after all.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    fn longest_tail_starting_a_stop(&self) -> usize {
        let mut best = 0;
        for stop in &self.stops {
            // Only proper prefixes: a whole stop string would have matched above.
            for len in (best + 1..stop.len()).rev() {
                if stop.is_char_boundary(len) && self.held.ends_with(&stop[..len]) {
                    best = len;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and returns (everything sent, whether it stopped).
    fn run(stops: &[&str], chunks: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut sent = String::new();
        for c in chunks {
            match m.push(c) {
                StopCheck::Continue(t) => sent.push_str(&t),
                StopCheck::Stopped(t) => {
                    sent.push_str(&t);
                    return (sent, true);
                }
            }
        }
        sent.push_str(&m.flush());
        (sent, false)
    }

    #[test]
    fn a_stop_split_across_chunks_is_matched_and_never_sent() {
        assert_eq!(
            run(&["STOP"], &["ab", "cS", "T", "OPxyz"]),
            ("abc".into(), true)
        );
        assert_eq!(run(&["\n\n"], &["line\n", "\nmore"]), ("line".into(), true));
    }

    #[test]
    fn held_text_that_turns_out_harmless_is_released() {
        let mut m = StopMatcher::new(vec!["STOP".into()]);
        assert_eq!(m.push("aST"), StopCheck::Continue("a".into()));
        assert_eq!(m.push("x"), StopCheck::Continue("STx".into()));
        assert_eq!(run(&["STOP"], &["ST", "O"]), ("STO".into(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(run(&["c", "ab"], &["xxabc"]), ("xx".into(), true));
    }

    #[test]
    fn no_stops_passes_everything_through() {
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
    }

    #[test]
    fn multibyte_stops_hold_back_on_character_boundaries() {
        assert_eq!(run(&["日本"], &["x日", "本y"]), ("x".into(), true));
        assert_eq!(run(&["日本"], &["x日", "y"]), ("x日y".into(), false));
    }
}
