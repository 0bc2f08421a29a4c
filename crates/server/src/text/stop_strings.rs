//! Stop strings matched across token boundaries and never streamed.
//!
//! Text is released only once it cannot be the start of a stop string: the longest tail that is
//! a prefix of some stop string is held back until the next chunk decides it. vLLM's
//! `include_stop_str_in_output` keeps the matched stop string at the end of the text (and still
//! nothing after it).

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCheck {
    /// Safe to send; generation goes on.
    Continue(String),
    /// A stop string matched: send this (the text before it, or up to its end when the stop
    /// string is kept) and finish.
    Stopped(String),
}

#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    /// The stop string that matched, once one has: what vLLM answers as `stop_reason` and
    /// Anthropic as `stop_sequence`.
    matched: Option<String>,
    /// `include_stop_str_in_output`: the matched stop string ends the text.
    keep_stop: bool,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            matched: None,
            keep_stop: false,
        }
    }

    /// As [`StopMatcher::new`], the matched stop string kept at the end of the text (vLLM's
    /// `include_stop_str_in_output`).
    pub fn keeping_stop(stops: Vec<String>) -> Self {
        Self {
            keep_stop: true,
            ..Self::new(stops)
        }
    }

    /// The stop string that stopped the text, if one did.
    pub fn matched(&self) -> Option<&str> {
        self.matched.as_deref()
    }

    pub fn push(&mut self, text: &str) -> StopCheck {
        if self.stops.is_empty() {
            return StopCheck::Continue(text.to_string());
        }
        self.held.push_str(text);
        // The earliest match; of several starting there, the first listed.
        let first_match = self
            .stops
            .iter()
            .filter_map(|s| Some((self.held.find(s.as_str())?, s)))
            .min_by_key(|&(at, _)| at);
        if let Some((at, stop)) = first_match {
            self.matched = Some(stop.clone());
            let end = if self.keep_stop { at + stop.len() } else { at };
            let before = self.held[..end].to_string();
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

    /// The stop that matched is named, across pieces; of two starting at one place, the first
    /// listed (these were the tests of `anthropic`'s own matcher before the detokenizer named the match).
    #[test]
    fn the_matching_stop_is_named_across_pieces_and_never_sent() {
        let mut stops = StopMatcher::new(vec!["END".into(), "".into(), "\n\n".into()]);
        assert_eq!(stops.push("one E"), StopCheck::Continue("one ".into()));
        assert_eq!(stops.matched(), None);
        assert_eq!(stops.push("N"), StopCheck::Continue(String::new()));
        assert_eq!(stops.push("D and more"), StopCheck::Stopped(String::new()));
        assert_eq!(stops.matched(), Some("END"));
        let mut stops = StopMatcher::new(vec!["END".into(), "\n\n".into()]);
        assert_eq!(stops.push("a\n\nEND"), StopCheck::Stopped("a".into()));
        assert_eq!(stops.matched(), Some("\n\n"));
        let mut stops = StopMatcher::new(vec!["ab".into(), "a".into()]);
        assert_eq!(stops.push("xab"), StopCheck::Stopped("x".into()));
        assert_eq!(stops.matched(), Some("ab"));
    }

    #[test]
    fn held_text_comes_out_when_the_text_ends_otherwise() {
        let mut stops = StopMatcher::new(vec!["END".into()]);
        assert_eq!(stops.push("the EN"), StopCheck::Continue("the ".into()));
        assert_eq!(stops.flush(), "EN");
        assert_eq!(stops.matched(), None);
        let mut none = StopMatcher::new(Vec::new());
        assert_eq!(none.push("x"), StopCheck::Continue("x".into()));
        assert_eq!(none.flush(), "");
    }

    #[test]
    fn a_kept_stop_ends_the_text_and_nothing_after_it_is_sent() {
        let mut m = StopMatcher::keeping_stop(vec!["STOP".into(), "\n\n".into()]);
        assert_eq!(m.push("abcS"), StopCheck::Continue("abc".into()));
        assert_eq!(m.push("TOPxyz"), StopCheck::Stopped("STOP".into()));
        assert_eq!(m.matched(), Some("STOP"));
        let mut m = StopMatcher::keeping_stop(vec!["\n\n".into()]);
        assert_eq!(
            m.push("line\n\nmore"),
            StopCheck::Stopped("line\n\n".into())
        );
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
