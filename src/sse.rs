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
///
/// Line endings are CRLF, LF or CR (HTML Living Standard "Parsing an event
/// stream"), and a CRLF split between two chunks is still one line ending.
/// Each byte is searched for a line ending once, however the stream is cut.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    /// How much of `buf` is known to hold no line ending.
    searched: usize,
    /// The last line ended with a CR at the end of the data so far: a LF
    /// starting the next chunk belongs to that line ending.
    after_cr: bool,
    current: Event,
    has_data: bool,
    max_event: usize,
    /// Bytes looked at while searching for line endings (tests bound it).
    #[cfg(test)]
    looked_at: usize,
}

impl Decoder {
    pub fn new(max_event: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            searched: 0,
            after_cr: false,
            current: Event::default(),
            has_data: false,
            max_event,
            #[cfg(test)]
            looked_at: 0,
        }
    }

    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, EventTooLarge> {
        let mut chunk = chunk;
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            chunk = chunk.strip_prefix(b"\n").unwrap_or(chunk);
        }
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.line_end() {
            let line = self.buf.split_to(pos);
            // Treat "\r\n" as one line ending.
            let terminator = self.buf.split_to(1);
            if terminator[0] == b'\r' {
                match self.buf.first() {
                    Some(b'\n') => drop(self.buf.split_to(1)),
                    None => self.after_cr = true,
                    Some(_) => {}
                }
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
        if self.buf.is_empty() {
            // Every line read: let go of the chunk's allocation, which the
            // emptied buffer still shares. A stream that carried a pushed
            // question then waits, maybe for minutes, holding nothing.
            self.buf = BytesMut::new();
        }
        Ok(events)
    }

    /// Where the first line ending in `buf` is, searching only bytes not searched before.
    fn line_end(&mut self) -> Option<usize> {
        let fresh = &self.buf[self.searched..];
        // memchr2 looks at a word (or a vector) at a time, not a byte.
        let found = memchr::memchr2(b'\n', b'\r', fresh);
        #[cfg(test)]
        {
            self.looked_at += found.map_or(fresh.len(), |p| p + 1);
        }
        match found {
            Some(p) => {
                let pos = self.searched + p;
                // What follows is split off with the line.
                self.searched = 0;
                Some(pos)
            }
            None => {
                self.searched = self.buf.len();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoder_with_every_line_read_holds_no_buffer() {
        let mut d = Decoder::new(1 << 20);
        let events = d.feed(b"event: message\ndata: {\"a\":1}\n\n").unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(d.buf.capacity(), 0);
        // A partial line is kept, and completed by the next chunk.
        assert!(d.feed(b"data: {\"b\"").unwrap().is_empty());
        assert!(d.buf.capacity() > 0);
        let events = d.feed(b":2}\n\n").unwrap();
        assert_eq!(events[0].data, "{\"b\":2}");
        assert_eq!(d.buf.capacity(), 0);
    }

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

    /// Fuzz finding (target `sse`, minimized input `\xa5data\r\n`: the stream
    /// `data\r\n` cut between CR and LF): the LF starting the second chunk was
    /// read as an empty line, which dispatched an event the whole stream does
    /// not have. So "data: a\r" + "\ndata: b\r\n\r\n" gave two events, not
    /// one; FastMCP servers end their SSE lines with CRLF.
    #[test]
    fn crlf_split_between_chunks_is_one_line_ending() {
        let mut d = Decoder::new(1024);
        assert_eq!(d.feed(b"data\r").unwrap(), vec![]);
        assert_eq!(d.feed(b"\n").unwrap(), vec![], "the fuzzer's input");
        let whole = b"data: a\r\ndata: b\r\n\r\n";
        for cut in 0..=whole.len() {
            let mut d = Decoder::new(1024);
            let mut evs = d.feed(&whole[..cut]).unwrap();
            evs.extend(d.feed(&whole[cut..]).unwrap());
            assert_eq!(evs.len(), 1, "cut at {cut}: {evs:?}");
            assert_eq!(evs[0].data, "a\nb", "cut at {cut}");
        }
        // An empty chunk in between does not lose the CR.
        let mut d = Decoder::new(1024);
        assert!(d.feed(b"data: a\r").unwrap().is_empty());
        assert!(d.feed(b"").unwrap().is_empty());
        assert!(d.feed(b"\n").unwrap().is_empty());
        assert_eq!(d.feed(b"\n").unwrap()[0].data, "a");
        // A lone CR still ends a line: CR CR is a line and an empty line.
        let mut d = Decoder::new(1024);
        assert_eq!(d.feed(b"data: a\r").unwrap(), vec![]);
        assert_eq!(d.feed(b"\r").unwrap()[0].data, "a");
    }

    /// A line that arrives a byte at a time is searched once, not once per
    /// byte (which made a 16 MiB line cost ~10^14 comparisons).
    #[test]
    fn a_slow_line_is_searched_once() {
        let mut d = Decoder::new(1 << 20);
        let line = format!("data: {}\n\n", "x".repeat(100_000));
        let mut evs = Vec::new();
        for b in line.as_bytes() {
            evs.extend(d.feed(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data.len(), 100_000);
        assert!(
            d.looked_at <= line.len(),
            "{} bytes looked at for {}",
            d.looked_at,
            line.len()
        );
    }

    #[test]
    fn encode_round_trips() {
        let mut d = Decoder::new(1024);
        let evs = d.feed(&encode_event("{\"x\":2}")).unwrap();
        assert_eq!(evs[0].data, "{\"x\":2}");
        assert_eq!(evs[0].event.as_deref(), Some("message"));
    }
}
