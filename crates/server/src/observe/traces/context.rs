//! W3C Trace Context: the `traceparent` header a request arrives with, and the ids of the span
//! ferrite opens for it (<https://www.w3.org/TR/trace-context/>).

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_span_id: [u8; 8],
    pub sampled: bool,
}

impl TraceParent {
    /// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`; `None` for anything else,
    /// all-zero ids included (the spec says to ignore such a header and start a new trace).
    pub fn parse(header: &str) -> Option<Self> {
        let mut parts = header.trim().split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let trace_id: [u8; 16] = hex_bytes(trace)?;
        let parent_span_id: [u8; 8] = hex_bytes(parent)?;
        let flags: [u8; 1] = hex_bytes(flags)?;
        let zero = trace_id.iter().all(|&b| b == 0) || parent_span_id.iter().all(|&b| b == 0);
        (!zero).then_some(Self {
            trace_id,
            parent_span_id,
            sampled: flags[0] & 1 == 1,
        })
    }
}

fn hex_bytes<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn new_trace_id() -> [u8; 16] {
    nonzero(|| rand::rng().random())
}

pub fn new_span_id() -> [u8; 8] {
    nonzero(|| rand::rng().random())
}

fn nonzero<const N: usize>(make: impl Fn() -> [u8; N]) -> [u8; N] {
    loop {
        let id = make();
        if id.iter().any(|&b| b != 0) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_specs_example_and_refuses_malformed_headers() {
        let p =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(hex(&p.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&p.parent_span_id), "00f067aa0ba902b7");
        assert!(p.sampled);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!TraceParent::parse(unsampled).unwrap().sampled);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn new_ids_are_random_and_nonzero() {
        assert_ne!(new_trace_id(), new_trace_id());
        assert!(new_span_id().iter().any(|&b| b != 0));
    }
}
