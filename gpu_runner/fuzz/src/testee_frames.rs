//! `testee_frames`: the testee protocol (docs/testee.md §2-§5,
//! `conformance::testee`) on both sides, over one byte stream.
//!
//! - **The runner's side.** The stream is what a testee wrote on its
//!   standard output: answers read one after another as the runner's
//!   reader thread reads them (`read_message_within` with
//!   [`MAX_ANSWER`], stopping at the first error), each body then read as
//!   an answer (`parse_message`, `Hello::parse`, `parse_decode_answer`,
//!   `parse_encode_answer`).
//! - **The testee's side.** The same stream as requests to the reference
//!   testee (`conformance testee`, `serve::serve` with no fault), whose
//!   answers must in turn read as answers on the runner's side.
//!
//! Checked beyond "no panic" ([`check`]):
//! - a body read is exactly the declared length, at most the limit, and
//!   the bytes it came from are `framed(body)` (the writer's framing);
//! - a declared length over the limit is refused having read only the 4
//!   length bytes, naming the length and the limit; the buffer never holds
//!   more than 64 KiB beyond twice what was sent;
//! - the stream delivered a few bytes at a time, with `Interrupted` errors
//!   between reads (a pipe), reads the same as in one piece;
//! - under a tight limit ([`TIGHT_LIMIT`]) no body exceeds it;
//! - an answer that parses writes back (in the shapes `serve` writes) to
//!   JSON that parses to the same answer; a handshake answer likewise
//!   (`Hello::to_json`);
//! - every answer the reference testee writes reads back on the runner's
//!   side: one per complete request, a JSON object, a handshake answer of
//!   protocol 1 to `hello`, and a valid answer to a `decode` or `encode`
//!   request.

use std::io::{self, Read};

use conformance::codec::{DecodeAnswer, EncodeAnswer};
use conformance::testee::serve::serve;
use conformance::testee::{
    framed, parse_decode_answer, parse_encode_answer, parse_message, read_message_within, Answer, FrameError, Hello,
    MAX_ANSWER, MAX_MESSAGE, PROTOCOL,
};
use serde_json::{json, Value as Json};

/// The second, tight limit every stream is also read under.
pub const TIGHT_LIMIT: u64 = 64;

/// A reader over `data` that hands out at most `step` bytes a call and,
/// when `interrupt`, answers every third call with `Interrupted` (as a
/// pipe read by a signalled process may); it counts what it handed out.
pub struct Trickle<'a> {
    data: &'a [u8],
    pub pos: usize,
    step: usize,
    interrupt: bool,
    calls: usize,
}

impl<'a> Trickle<'a> {
    pub fn new(data: &'a [u8], step: usize, interrupt: bool) -> Trickle<'a> {
        Trickle { data, pos: 0, step: step.max(1), interrupt, calls: 0 }
    }
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.interrupt && self.calls % 3 == 0 {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let n = buf.len().min(self.step).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// One read of a message, in comparable form.
#[derive(Debug, PartialEq, Eq)]
pub enum Read1 {
    Body(Vec<u8>),
    End,
    Truncated { read: usize, wanted: u64 },
    TooLong(u64, u64),
}

/// Every message of `data` as the runner's reader thread reads them
/// (until the first error), through a [`Trickle`] of `step` bytes, each
/// read checked against the framing; the last entry is the error.
pub fn read_answers(data: &[u8], limit: u64, step: usize, interrupt: bool) -> Vec<Read1> {
    let mut r = Trickle::new(data, step, interrupt);
    let mut out = Vec::new();
    loop {
        let start = r.pos;
        let got = read_message_within(&mut r, limit);
        let end = r.pos;
        let effective = limit.min(MAX_MESSAGE);
        let declared = data.get(start..start + 4).map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        let entry = match got {
            Ok(body) => {
                assert!(
                    body.len() as u64 <= effective,
                    "a body of {} bytes read under a limit of {effective}",
                    body.len()
                );
                assert_eq!(Some(body.len() as u64), declared, "the body is not its declared length");
                assert_eq!(&data[start..end], framed(&body).as_slice(), "the bytes read are not the body framed");
                let held = body.capacity();
                assert!(held <= (64 << 10).max(2 * body.len()), "{held} bytes held for a body of {}", body.len());
                Read1::Body(body)
            }
            Err(FrameError::End) => {
                assert_eq!((start, end), (data.len(), data.len()), "the end of input before the input ended");
                Read1::End
            }
            Err(FrameError::Truncated { read, wanted }) => {
                assert!((read as u64) < wanted, "truncated after {read} of {wanted} bytes");
                assert_eq!(end, data.len(), "truncated before the input ended");
                Read1::Truncated { read, wanted }
            }
            Err(FrameError::TooLong(n, l)) => {
                assert_eq!(l, effective, "the refusal names another limit");
                assert!(n > l, "a declared length of {n} refused under a limit of {l}");
                assert_eq!(Some(n), declared, "the refusal names another length");
                assert_eq!(end, start + 4, "a refused message's body was read");
                Read1::TooLong(n, l)
            }
            Err(FrameError::Io(e)) => panic!("an I/O error from a reader that gives none: {e}"),
        };
        let last = !matches!(entry, Read1::Body(_));
        out.push(entry);
        if last {
            return out;
        }
    }
}

/// A decode answer written as `serve` writes it.
pub fn decode_answer_json(a: &Answer<DecodeAnswer>) -> Json {
    match a {
        Answer::Answer(DecodeAnswer::Accept { view, drift }) => json!({"accept": {"value": view, "drift": drift}}),
        Answer::Answer(DecodeAnswer::Reject { class, detail }) => json!({"reject": class.as_str(), "detail": detail}),
        Answer::Skipped(why) => json!({ "skipped": why }),
        Answer::Error(message) => json!({ "error": message }),
    }
}

/// An encode answer written as `serve` writes it.
pub fn encode_answer_json(a: &Answer<EncodeAnswer>) -> Json {
    match a {
        Answer::Answer(EncodeAnswer::Frames(frames)) => {
            json!({"frames": frames.iter().map(hex::encode).collect::<Vec<_>>()})
        }
        Answer::Answer(EncodeAnswer::Reject { class, detail }) => json!({"reject": class.as_str(), "detail": detail}),
        Answer::Skipped(why) => json!({ "skipped": why }),
        Answer::Error(message) => json!({ "error": message }),
    }
}

/// What the runner makes of one answer body; each answer that reads
/// writes back to the same answer.
pub fn check_answer(body: &[u8]) {
    let Ok(answer) = parse_message(body) else { return };
    if let Ok(hello) = Hello::parse(&answer) {
        assert_eq!(Hello::parse(&hello.to_json()).as_ref(), Ok(&hello), "a handshake answer does not write back");
    }
    if let Ok(a) = parse_decode_answer(&answer) {
        assert_eq!(parse_decode_answer(&decode_answer_json(&a)), Ok(a), "a decode answer does not write back");
    }
    if let Ok(a) = parse_encode_answer(&answer) {
        assert_eq!(parse_encode_answer(&encode_answer_json(&a)), Ok(a), "an encode answer does not write back");
    }
}

/// The request kinds `serve` tells apart, by the keys of a request.
fn kind_of(request: &[u8]) -> &'static str {
    let Ok(r) = parse_message(request) else { return "other" };
    match (r.get("hello").is_some(), r.get("decode").is_some(), r.get("encode").is_some()) {
        (true, _, _) => "hello",
        (false, true, false) => "decode",
        (false, false, true) => "encode",
        _ => "other",
    }
}

/// The reference testee on `data` as requests: each answer reads back on
/// the runner's side as an answer to its request.
pub fn check_serve(data: &[u8]) {
    let requests: Vec<Vec<u8>> = read_answers(data, MAX_MESSAGE, usize::MAX, false)
        .into_iter()
        .filter_map(|r| match r {
            Read1::Body(b) => Some(b),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let _ = serve(Trickle::new(data, 7, true), &mut out, None);
    let answers = read_answers(&out, MAX_ANSWER, usize::MAX, false);
    assert_eq!(answers.last(), Some(&Read1::End), "the reference testee's output does not end at a message boundary");
    assert_eq!(answers.len() - 1, requests.len(), "not one answer per complete request");
    for (request, answer) in requests.iter().zip(&answers) {
        let Read1::Body(body) = answer else { unreachable!("only the last entry is not a body") };
        let json = parse_message(body).unwrap_or_else(|e| panic!("the reference testee wrote a non-answer: {e}"));
        match kind_of(request) {
            "hello" => {
                let hello = Hello::parse(&json).unwrap_or_else(|e| panic!("its handshake answer does not read: {e}"));
                assert_eq!(hello.protocol, PROTOCOL);
            }
            "decode" => {
                parse_decode_answer(&json).unwrap_or_else(|e| panic!("its decode answer does not read: {e}"));
            }
            "encode" => {
                parse_encode_answer(&json).unwrap_or_else(|e| panic!("its encode answer does not read: {e}"));
            }
            _ => {
                // `skipped` or `error`: an answer to either request kind.
                parse_decode_answer(&json).unwrap_or_else(|e| panic!("its answer does not read: {e}"));
            }
        }
        check_answer(body);
    }
}

/// Every check of this target on one input.
pub fn check(data: &[u8]) {
    let whole = read_answers(data, MAX_ANSWER, usize::MAX, false);
    let trickled = read_answers(data, MAX_ANSWER, 3, true);
    assert_eq!(whole, trickled, "the stream read a few bytes at a time reads differently");
    read_answers(data, TIGHT_LIMIT, 5, false);
    for r in &whole {
        if let Read1::Body(body) = r {
            check_answer(body);
        }
    }
    check_serve(data);
}
