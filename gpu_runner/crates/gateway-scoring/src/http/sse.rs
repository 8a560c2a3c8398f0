//! Server-sent events: the `data:` payloads of a whole stream
//! ([`sse_data`]) and the running count of events and their sizes over a
//! body read in pieces ([`EventScan`]).

/// Counts server-sent events (`data:` at a line's start) and the longest
/// event (bytes between blank lines) over a body fed in pieces.
#[derive(Debug, Default)]
pub(super) struct EventScan {
    pub(super) events: usize,
    pub(super) longest_event: usize,
    /// Bytes of the current event so far.
    event_len: usize,
    /// The current line's first bytes (up to 5) and its length.
    line_start: [u8; 5],
    line_len: usize,
}

impl EventScan {
    pub(super) fn feed(&mut self, data: &[u8]) {
        for &b in data {
            if b == b'\n' {
                let blank = self.line_len == 0 || (self.line_len == 1 && self.line_start[0] == b'\r');
                if blank {
                    self.event_len = 0;
                } else {
                    self.event_len += 1;
                    self.longest_event = self.longest_event.max(self.event_len);
                }
                self.line_len = 0;
                continue;
            }
            if self.line_len < 5 {
                self.line_start[self.line_len] = b;
                if self.line_len == 4 && &self.line_start == b"data:" {
                    self.events += 1;
                }
            }
            self.line_len += 1;
            self.event_len += 1;
            self.longest_event = self.longest_event.max(self.event_len);
        }
    }
}

/// The `data:` payloads of a server-sent event stream, in order (`[DONE]`
/// included as it is).
pub fn sse_data(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = cur.take() {
                out.push(d);
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            let d = d.strip_prefix(' ').unwrap_or(d);
            match &mut cur {
                Some(c) => {
                    c.push('\n');
                    c.push_str(d);
                }
                None => cur = Some(d.to_string()),
            }
        }
    }
    if let Some(d) = cur {
        out.push(d);
    }
    out
}
