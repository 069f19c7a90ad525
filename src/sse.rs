//! Server-Sent Events: encoding for the front's response streams and a
//! bounded decoder for legacy servers' streams.

use bytes::{Bytes, BytesMut};

/// One `message` event carrying a JSON-RPC message.
pub fn encode_event(data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 24);
    out.push_str("event: message\n");
    // JSON has no raw newlines, but a `data:` line per line keeps any payload valid SSE.
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// A comment line, used as keep-alive (spec 2026-07-28 streamable-http.mdx
/// "Receiving Messages": clients must ignore lines beginning with a colon).
pub fn keepalive() -> Bytes {
    Bytes::from_static(b":\n\n")
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SSE event larger than {0} bytes")]
pub struct EventTooLarge(pub usize);

/// Incremental SSE decoder with a bound on the size of one event.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    current: Event,
    has_data: bool,
    max_event: usize,
}

impl Decoder {
    pub fn new(max_event: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            current: Event::default(),
            has_data: false,
            max_event,
        }
    }

    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, EventTooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            let line = self.buf.split_to(pos);
            // Treat "\r\n" as one line ending.
            let terminator = self.buf.split_to(1);
            if terminator[0] == b'\r' && self.buf.first() == Some(&b'\n') {
                let _ = self.buf.split_to(1);
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if self.has_data || self.current.id.is_some() || self.current.retry.is_some() {
                    let mut ev = std::mem::take(&mut self.current);
                    if ev.data.ends_with('\n') {
                        ev.data.pop();
                    }
                    events.push(ev);
                }
                self.has_data = false;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (&*line, ""),
            };
            match field {
                "data" => {
                    self.current.data.push_str(value);
                    self.current.data.push('\n');
                    self.has_data = true;
                }
                "event" => self.current.event = Some(value.to_owned()),
                "id" => self.current.id = Some(value.to_owned()),
                "retry" => self.current.retry = value.parse().ok(),
                _ => {}
            }
            if self.current.data.len() > self.max_event {
                return Err(EventTooLarge(self.max_event));
            }
        }
        if self.buf.len() > self.max_event {
            return Err(EventTooLarge(self.max_event));
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_split_events_and_ignores_comments() {
        let mut d = Decoder::new(1024);
        assert!(
            d.feed(b": keepalive\n\nevent: message\nid: 7\nda")
                .unwrap()
                .is_empty()
        );
        let evs = d.feed(b"ta: {\"a\":1}\r\n\r\nid: 8\ndata:\n\n").unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[0].id.as_deref(), Some("7"));
        assert_eq!(evs[1].data, "");
        assert_eq!(evs[1].id.as_deref(), Some("8"));
    }

    #[test]
    fn bounds_event_size() {
        let mut d = Decoder::new(8);
        assert!(d.feed(b"data: 0123456789\n").is_err());
        let mut d = Decoder::new(8);
        assert!(d.feed(b"data: 0123456789").is_err());
    }

    #[test]
    fn encode_round_trips() {
        let mut d = Decoder::new(1024);
        let evs = d.feed(&encode_event("{\"x\":2}")).unwrap();
        assert_eq!(evs[0].data, "{\"x\":2}");
        assert_eq!(evs[0].event.as_deref(), Some("message"));
    }
}
