//! Server-sent events, parsed incrementally from the bytes of a streaming response.

/// Feeds on body chunks as they arrive and hands out the `data` of each complete event.
/// Events may be split anywhere across chunks; lines end in `\n` or `\r\n`.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an unfinished line.
    line: Vec<u8>,
    /// `data:` lines of the event being read, joined with `\n`.
    data: Option<String>,
}

impl SseParser {
    /// Every event completed by `bytes`, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            if line.is_empty() {
                events.extend(self.data.take());
            } else {
                self.field(&line);
            }
        }
        events
    }

    /// An event still open when the stream ended (a server that omits the final blank line).
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.field(&line);
        }
        self.data.take()
    }

    fn field(&mut self, line: &[u8]) {
        // Comments (keep-alives) start with ':'; only `data` matters here.
        let Some(value) = line.strip_prefix(b"data:") else {
            return;
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        let value = String::from_utf8_lossy(value);
        match &mut self.data {
            Some(d) => {
                d.push('\n');
                d.push_str(&value);
            }
            None => self.data = Some(value.into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        for split in 1..stream.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&stream[..split]);
            got.extend(p.push(&stream[split..]));
            assert_eq!(
                got,
                vec!["{\"a\":1}", "{\"b\":\n2}", "[DONE]"],
                "split {split}"
            );
            assert_eq!(p.finish(), None);
        }
    }

    #[test]
    fn an_unterminated_last_event_is_recovered_at_the_end() {
        let mut p = SseParser::default();
        assert!(p.push(b"data:x").is_empty());
        assert_eq!(p.finish().as_deref(), Some("x"));
    }
}
