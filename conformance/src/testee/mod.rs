//! The testee protocol of docs/testee.md: any codec, in any language, scored
//! against any corpus with the checks and reports of `conformance verify`.
//!
//! A testee is a program that reads requests on its standard input and
//! answers on its standard output, one message at a time, each a 4-byte
//! little-endian length and a JSON object (docs/testee.md §2). After a
//! handshake that says what it supports (§3), the runner asks it to `decode`
//! frames and `encode` views (§4); the answers (§5) feed the very checks the
//! in-process path runs ([`crate::check::check_message`]).
//!
//! - this module: the protocol's framing and its messages, shared by both
//!   sides;
//! - [`client`]: the runner's side ([`Testee`]): one long-lived process,
//!   per-request timeouts, restarts after a crash, a hang or garbage (§6);
//! - [`serve`]: `conformance testee`, the reference implementation as a
//!   testee (§9), with the fault modes the tests use.
//!
//! Relies on `engine_protocol::view::parse_json` to read JSON as deep as a
//! view can nest (docs/limits.md) and on the reject classes and message
//! names of docs/case-format.md §4.1 and §5.1.

pub mod client;
pub mod serve;

use std::io::{self, Read, Write};

use engine_protocol::{MessageKind, RejectClass};
use serde_json::{json, Value as Json};

pub use client::{check, split_command, CommandError, Testee, TesteeError};

use crate::codec::{DecodeAnswer, EncodeAnswer, Target};

/// The protocol version this build speaks (docs/testee.md §3).
pub const PROTOCOL: u64 = 1;

/// The longest message either side accepts (docs/testee.md §2.2).
pub const MAX_MESSAGE: u64 = 1 << 30;

/// The longest answer the runner reads from a testee (docs/testee.md §2.2,
/// docs/limits.md "Peers"): an answer is a verdict and a view or the
/// frames of one message, and the corpus's largest is under 1 MiB; a
/// longer declared length is refused before anything is read, so a
/// hostile testee costs the runner at most this much memory.
pub const MAX_ANSWER: u64 = 64 << 20;

/// The skip reason of the gateway kinds under `--testee` (docs/testee.md §8).
pub const GATEWAY_SKIP: &str = "the testee protocol covers message cases only";

/// Why a message could not be read (docs/testee.md §2.2).
#[derive(Debug)]
pub enum FrameError {
    /// End of input at a message boundary: the other side is done (or gone).
    End,
    /// End of input inside a message.
    Truncated {
        read: usize,
        wanted: u64,
    },
    /// A declared length over the limit (the second field:
    /// [`MAX_MESSAGE`], or [`MAX_ANSWER`] for a testee's answers).
    TooLong(u64, u64),
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::End => write!(f, "end of input"),
            FrameError::Truncated { read, wanted } => {
                write!(f, "the message ends after {read} of its {wanted} bytes")
            }
            FrameError::TooLong(n, limit) => write!(f, "a declared length of {n} bytes (more than {limit})"),
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Writes one message: the length of `body` as 4 bytes little-endian, then
/// `body`. Does not flush.
pub fn write_message(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let n = u32::try_from(body.len())
        .ok()
        .filter(|&n| u64::from(n) <= MAX_MESSAGE)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message longer than 1 GiB"))?;
    w.write_all(&n.to_le_bytes())?;
    w.write_all(body)
}

/// The message framed for writing in one go.
pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Reads one message body. The buffer grows as bytes arrive, so a garbage
/// length costs no allocation beyond what was sent.
pub fn read_message(r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
    read_message_within(r, MAX_MESSAGE)
}

/// [`read_message`], refusing a declared length over `limit` before
/// reading its body.
pub fn read_message_within(r: &mut impl Read, limit: u64) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::End),
            Ok(0) => return Err(FrameError::Truncated { read: got, wanted: 4 }),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let n = u64::from(u32::from_le_bytes(len));
    if n > limit.min(MAX_MESSAGE) {
        return Err(FrameError::TooLong(n, limit.min(MAX_MESSAGE)));
    }
    let mut body = Vec::with_capacity(n.min(1 << 16) as usize);
    r.take(n).read_to_end(&mut body).map_err(FrameError::Io)?;
    if (body.len() as u64) < n {
        return Err(FrameError::Truncated { read: body.len(), wanted: n });
    }
    Ok(body)
}

/// A message that breaks the testee protocol (docs/testee.md §2-§5): what
/// is wrong with it, naming the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    /// The body is not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The body is not JSON (its start quoted).
    #[error("not JSON (`{excerpt}`): {error}")]
    NotJson {
        excerpt: String,
        #[source]
        error: engine_protocol::view::JsonError,
    },
    /// The body is JSON but not an object (its start quoted).
    #[error("not a JSON object: {excerpt}")]
    NotObject { excerpt: String },
    /// The answer to `hello` has no `hello` key.
    #[error("the answer to `hello` has no `hello` key")]
    NoHello,
    /// A key that is missing or breaks its rule (`must be a string`).
    #[error("`{key}` {rule}")]
    Key { key: String, rule: &'static str },
    /// An answer without any of the answer keys.
    #[error("no answer key (one of {})", ANSWER_KEYS.join(", "))]
    NoAnswerKey,
    /// An answer with more than one answer key.
    #[error("several answer keys ({})", .keys.join(", "))]
    SeveralAnswerKeys { keys: Vec<&'static str> },
    /// An answer key that does not answer this request (`frames` to a
    /// decode request).
    #[error("`{key}` does not answer a `{request}` request")]
    WrongAnswerKey { key: &'static str, request: &'static str },
    /// `reject` names no reject class of docs/case-format.md §5.1.
    #[error("`{class}` is not a reject class")]
    NotARejectClass { class: String },
    /// An encoded frame that is not a string.
    #[error("frames[{index}] is not a string")]
    FrameNotString { index: usize },
    /// An encoded frame that is not hex.
    #[error("frames[{index}] is not hex: {error}")]
    FrameNotHex {
        index: usize,
        #[source]
        error: hex::FromHexError,
    },
}

impl ProtocolError {
    fn key(key: impl Into<String>, rule: &'static str) -> Self {
        ProtocolError::Key { key: key.into(), rule }
    }
}

/// A message body as a JSON object (docs/testee.md §2.2-§2.3).
pub fn parse_message(body: &[u8]) -> Result<Json, ProtocolError> {
    let text = std::str::from_utf8(body).map_err(ProtocolError::NotUtf8)?;
    let json = engine_protocol::view::parse_json(text)
        .map_err(|error| ProtocolError::NotJson { excerpt: excerpt(text), error })?;
    if json.is_object() {
        Ok(json)
    } else {
        Err(ProtocolError::NotObject { excerpt: excerpt(text) })
    }
}

/// The start of a text, for messages.
pub fn excerpt(text: &str) -> String {
    let mut s: String = text.chars().take(80).collect();
    if s.len() < text.len() {
        s.push_str("...");
    }
    s
}

// ===== the handshake (docs/testee.md §3) =====

/// One (dialect, version) a testee supports, with its message types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    pub dialect: String,
    pub version: String,
    pub messages: Vec<String>,
}

/// A testee's answer to the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u64,
    pub implementation: String,
    pub supports: Vec<Support>,
    pub unsupported: Option<String>,
}

/// The handshake request.
pub fn hello_request() -> Vec<u8> {
    json!({"hello": {"protocol": PROTOCOL}}).to_string().into_bytes()
}

impl Hello {
    pub fn to_json(&self) -> Json {
        let supports: Vec<Json> = self
            .supports
            .iter()
            .map(|s| json!({"dialect": s.dialect, "version": s.version, "messages": s.messages}))
            .collect();
        let mut hello = json!({"protocol": self.protocol, "implementation": self.implementation, "supports": supports});
        if let Some(why) = &self.unsupported {
            hello["unsupported"] = json!(why);
        }
        json!({ "hello": hello })
    }

    /// Reads a handshake answer; errors say what is wrong with it.
    pub fn parse(answer: &Json) -> Result<Hello, ProtocolError> {
        let hello = answer.get("hello").ok_or(ProtocolError::NoHello)?;
        let protocol = hello
            .get("protocol")
            .and_then(Json::as_u64)
            .ok_or_else(|| ProtocolError::key("hello.protocol", "must be a non-negative integer"))?;
        let implementation = match hello.get("implementation") {
            None => "unnamed".to_string(),
            Some(Json::String(s)) => s.clone(),
            Some(_) => return Err(ProtocolError::key("hello.implementation", "must be a string")),
        };
        let unsupported = match hello.get("unsupported") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(_) => return Err(ProtocolError::key("hello.unsupported", "must be a string")),
        };
        let mut supports = Vec::new();
        if protocol == PROTOCOL {
            let list = hello
                .get("supports")
                .and_then(Json::as_array)
                .ok_or_else(|| ProtocolError::key("hello.supports", "must be an array"))?;
            for (i, s) in list.iter().enumerate() {
                let field = |k: &str| {
                    s.get(k)
                        .and_then(Json::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| ProtocolError::key(format!("hello.supports[{i}].{k}"), "must be a string"))
                };
                let messages = s
                    .get("messages")
                    .and_then(Json::as_array)
                    .and_then(|m| m.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
                    .ok_or_else(|| {
                        ProtocolError::key(format!("hello.supports[{i}].messages"), "must be an array of strings")
                    })?;
                supports.push(Support { dialect: field("dialect")?, version: field("version")?, messages });
            }
        }
        Ok(Hello { protocol, implementation, supports, unsupported })
    }

    /// Whether the testee declared `message` of `dialect` `version`.
    pub fn supports(&self, dialect: &str, version: &str, message: &str) -> bool {
        self.supports
            .iter()
            .any(|s| s.dialect == dialect && s.version == version && s.messages.iter().any(|m| m == message))
    }

    /// The skip reason of a case outside the declaration (docs/testee.md §3.2).
    pub fn unsupported_reason(&self, dialect: &str, version: &str, message: &str) -> String {
        let mut why = format!("the testee ({}) does not support {dialect} {version} {message}", self.implementation);
        if let Some(reason) = &self.unsupported {
            why.push_str(": ");
            why.push_str(reason);
        }
        why
    }
}

// ===== requests (docs/testee.md §4) =====

/// The request kinds this protocol version defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Hello,
    Decode,
    Encode,
}

impl RequestKind {
    pub fn key(self) -> &'static str {
        match self {
            RequestKind::Hello => "hello",
            RequestKind::Decode => "decode",
            RequestKind::Encode => "encode",
        }
    }
}

fn quoted(s: &str) -> String {
    Json::from(s).to_string()
}

fn request(target: &Target, kind: RequestKind, key: &str, payload: &str) -> Vec<u8> {
    format!(
        "{{\"case\":{},\"{}\":{{\"dialect\":{},\"version\":{},\"message\":{},\"{key}\":{payload}}}}}",
        quoted(target.case),
        kind.key(),
        quoted(target.dialect),
        quoted(target.version),
        quoted(target.message_name()),
    )
    .into_bytes()
}

/// A `decode` request for `frames` (docs/testee.md §4.2).
pub fn decode_request(target: &Target, frames: &[Vec<u8>]) -> Vec<u8> {
    let hex: Vec<Json> = frames.iter().map(|f| Json::from(hex::encode(f))).collect();
    request(target, RequestKind::Decode, "frames", &Json::Array(hex).to_string())
}

/// An `encode` request for `view` (docs/testee.md §4.3).
pub fn encode_request(target: &Target, view: &Json) -> Vec<u8> {
    request(target, RequestKind::Encode, "value", &view.to_string())
}

// ===== answers (docs/testee.md §5) =====

/// A testee's answer to a decode or encode request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    Answer(T),
    Skipped(String),
    Error(String),
}

const ANSWER_KEYS: [&str; 5] = ["accept", "frames", "reject", "skipped", "error"];

/// The one answer key of `answer` that fits `kind`; errors say why not.
fn answer_key(answer: &Json, kind: RequestKind) -> Result<(&'static str, &Json), ProtocolError> {
    let present: Vec<&'static str> = ANSWER_KEYS.iter().copied().filter(|k| answer.get(*k).is_some()).collect();
    let (key, value) = match present.as_slice() {
        [key] => (*key, &answer[*key]),
        [] => return Err(ProtocolError::NoAnswerKey),
        _ => return Err(ProtocolError::SeveralAnswerKeys { keys: present }),
    };
    let fits = match key {
        "accept" => kind == RequestKind::Decode,
        "frames" => kind == RequestKind::Encode,
        _ => true,
    };
    if !fits {
        return Err(ProtocolError::WrongAnswerKey { key, request: kind.key() });
    }
    Ok((key, value))
}

fn reject(value: &Json, answer: &Json) -> Result<(RejectClass, String), ProtocolError> {
    let class = value.as_str().ok_or_else(|| ProtocolError::key("reject", "must be a reject class (a string)"))?;
    let class = RejectClass::parse(class).ok_or_else(|| ProtocolError::NotARejectClass { class: class.to_string() })?;
    let detail = match answer.get("detail") {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(_) => return Err(ProtocolError::key("detail", "must be a string")),
    };
    Ok((class, detail))
}

fn text(value: &Json, key: &str) -> Result<String, ProtocolError> {
    value.as_str().map(str::to_string).ok_or_else(|| ProtocolError::key(key, "must be a string"))
}

/// Reads an answer to a decode request.
pub fn parse_decode_answer(answer: &Json) -> Result<Answer<DecodeAnswer>, ProtocolError> {
    Ok(match answer_key(answer, RequestKind::Decode)? {
        ("accept", a) => {
            let view = a.get("value").cloned().ok_or_else(|| ProtocolError::key("accept", "has no `value`"))?;
            let not_strings = || ProtocolError::key("accept.drift", "must be an array of strings");
            let drift = match a.get("drift") {
                None | Some(Json::Null) => Vec::new(),
                Some(Json::Array(xs)) => xs
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(not_strings)?,
                Some(_) => return Err(not_strings()),
            };
            Answer::Answer(DecodeAnswer::Accept { view, drift })
        }
        ("reject", v) => {
            let (class, detail) = reject(v, answer)?;
            Answer::Answer(DecodeAnswer::Reject { class, detail })
        }
        ("skipped", v) => Answer::Skipped(text(v, "skipped")?),
        (_, v) => Answer::Error(text(v, "error")?),
    })
}

/// Reads an answer to an encode request.
pub fn parse_encode_answer(answer: &Json) -> Result<Answer<EncodeAnswer>, ProtocolError> {
    Ok(match answer_key(answer, RequestKind::Encode)? {
        ("frames", v) => {
            let list = v.as_array().ok_or_else(|| ProtocolError::key("frames", "must be an array of hex strings"))?;
            let frames = list
                .iter()
                .enumerate()
                .map(|(index, x)| {
                    let s = x.as_str().ok_or(ProtocolError::FrameNotString { index })?;
                    hex::decode(s).map_err(|error| ProtocolError::FrameNotHex { index, error })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Answer::Answer(EncodeAnswer::Frames(frames))
        }
        ("reject", v) => {
            let (class, detail) = reject(v, answer)?;
            Answer::Answer(EncodeAnswer::Reject { class, detail })
        }
        ("skipped", v) => Answer::Skipped(text(v, "skipped")?),
        (_, v) => Answer::Error(text(v, "error")?),
    })
}

/// The message types of docs/case-format.md §4.1, by name.
pub fn message_names() -> Vec<String> {
    MessageKind::ALL.iter().map(|k| k.name().to_string()).collect()
}

/// The message types `release` has, by their names in its dialect.
pub fn message_names_in(release: &engine_protocol::ReleaseSchema) -> Vec<String> {
    MessageKind::ALL.iter().filter(|k| k.in_release(release)).map(|k| k.name_in(release).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_as_written() {
        let mut buf = Vec::new();
        write_message(&mut buf, b"{\"hello\":{}}").unwrap();
        assert_eq!(buf[..4], [12, 0, 0, 0]);
        assert_eq!(read_message(&mut buf.as_slice()).unwrap(), b"{\"hello\":{}}");
        assert!(matches!(read_message(&mut &buf[buf.len()..]), Err(FrameError::End)));
    }

    #[test]
    fn a_message_cut_short_is_truncated_not_the_end() {
        let buf = framed(b"{\"hello\":{}}");
        assert!(matches!(read_message(&mut &buf[..2]), Err(FrameError::Truncated { read: 2, wanted: 4 })));
        assert!(matches!(read_message(&mut &buf[..9]), Err(FrameError::Truncated { read: 5, wanted: 12 })));
    }

    #[test]
    fn a_declared_length_over_a_gibibyte_is_refused_before_reading_it() {
        let declared = [0u8, 0, 0, 0x41, b'{'];
        assert!(matches!(read_message(&mut &declared[..]), Err(FrameError::TooLong(0x4100_0000, MAX_MESSAGE))));
    }

    #[test]
    fn an_answer_must_hold_exactly_one_answer_key_that_fits_the_request() {
        let both = json!({"accept": {"value": []}, "reject": "type"});
        assert!(matches!(parse_decode_answer(&both), Err(ProtocolError::SeveralAnswerKeys { .. })));
        assert_eq!(parse_decode_answer(&both).unwrap_err().to_string(), "several answer keys (accept, reject)");
        assert_eq!(
            parse_decode_answer(&json!({"frames": []})).unwrap_err(),
            ProtocolError::WrongAnswerKey { key: "frames", request: "decode" }
        );
        assert_eq!(
            parse_encode_answer(&json!({"accept": {"value": []}})).unwrap_err(),
            ProtocolError::WrongAnswerKey { key: "accept", request: "encode" }
        );
        assert_eq!(parse_decode_answer(&json!({})).unwrap_err(), ProtocolError::NoAnswerKey);
    }

    #[test]
    fn a_reject_outside_the_classes_of_the_format_is_garbage() {
        assert_eq!(
            parse_decode_answer(&json!({"reject": "nope"})).unwrap_err(),
            ProtocolError::NotARejectClass { class: "nope".into() }
        );
        let ok = parse_decode_answer(&json!({"reject": "missing-field", "detail": "x"})).unwrap();
        assert_eq!(ok, Answer::Answer(DecodeAnswer::Reject { class: RejectClass::MissingField, detail: "x".into() }));
    }

    #[test]
    fn an_accept_without_drift_has_none_and_frames_must_be_hex() {
        let ok = parse_decode_answer(&json!({"accept": {"value": [1]}})).unwrap();
        assert_eq!(ok, Answer::Answer(DecodeAnswer::Accept { view: json!([1]), drift: vec![] }));
        let e = parse_encode_answer(&json!({"frames": ["0g"]})).unwrap_err();
        assert!(matches!(e, ProtocolError::FrameNotHex { index: 0, .. }), "{e}");
    }

    #[test]
    fn requests_are_json_objects_naming_the_case_and_the_message() {
        let target = Target {
            case: "vllm/0.33.0/abort/empty",
            dialect: "vllm",
            version: "0.33.0",
            message: MessageKind::AbortRequest,
        };
        let req = parse_message(&decode_request(&target, &[vec![1], vec![0x90]])).unwrap();
        assert_eq!(
            req,
            json!({"case": "vllm/0.33.0/abort/empty",
                   "decode": {"dialect": "vllm", "version": "0.33.0", "message": "AbortRequest", "frames": ["01", "90"]}})
        );
        let req = parse_message(&encode_request(&target, &json!(["a\"b"]))).unwrap();
        assert_eq!(req["encode"]["value"], json!(["a\"b"]));
    }

    #[test]
    fn a_hello_reads_back_and_names_what_is_unsupported() {
        let hello = Hello {
            protocol: PROTOCOL,
            implementation: "x".into(),
            supports: vec![Support { dialect: "vllm".into(), version: "0.33.0".into(), messages: message_names() }],
            unsupported: Some("one release only".into()),
        };
        let back = Hello::parse(&hello.to_json()).unwrap();
        assert_eq!(back, hello);
        assert!(back.supports("vllm", "0.33.0", "AbortRequest"));
        assert!(!back.supports("vllm", "0.32.0", "AbortRequest"));
        assert_eq!(
            back.unsupported_reason("vllm", "0.32.0", "AbortRequest"),
            "the testee (x) does not support vllm 0.32.0 AbortRequest: one release only"
        );
    }
}
