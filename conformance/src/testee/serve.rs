//! `conformance testee`: the reference implementation (`engine-protocol`)
//! serving the testee protocol of docs/testee.md on standard input and
//! output (§9 there). It declares every release this build has a schema
//! table for and every message type of docs/case-format.md §4.1, decodes
//! with the decoder's default limits (docs/limits.md) and answers a
//! rejection with its class and `<path>: <detail>`.
//!
//! [`TesteeFault`]s make it a broken testee for the tests of the runner: wrong
//! answers of each kind the checks must catch, and a crash, a hang or
//! garbage after a number of requests, which the runner must survive.

use std::io::{Read, Write};
use std::str::FromStr;
use std::time::Duration;

use engine_protocol::schema::ALL_RELEASES;
use engine_protocol::view::{from_view_in, to_view};
use engine_protocol::Dialect;
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind, RejectClass};
use serde_json::{json, Value as Json};

use super::{
    message_names_in, parse_message, read_message, write_message, FrameError, Hello, Support, MAX_MESSAGE, PROTOCOL,
};
use crate::codec::reject_detail;

/// A deliberate fault (docs/testee.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TesteeFault {
    /// Accepted messages answered `reject validation`, rejected ones `accept`.
    FlipAccept,
    /// Every rejection answered with another class.
    WrongClass,
    /// A key (objects) or an element (arrays) added to every accepted view.
    WrongView,
    /// Accepted messages answered without their drift.
    DropDrift,
    /// The last byte of every encoded message flipped.
    CorruptEncode,
    /// Every encode request answered `skipped` (a decoder-only testee).
    SkipEncode,
    /// Serve this many requests after the handshake, then exit with status 3
    /// without answering.
    CrashAfter(usize),
    /// Serve this many, then stop answering (and reading).
    HangAfter(usize),
    /// Serve this many, then answer one message that is not JSON.
    GarbageAfter(usize),
    /// Serve this many, then declare a message of the protocol's largest
    /// length and write bytes without end (a hostile peer: the runner
    /// must refuse it by its length, not read it).
    FloodAfter(usize),
}

/// Why a `--fault` value names no fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// Not one of the fault names.
    #[error("unknown fault `{0}`")]
    Unknown(String),
    /// A `NAME=N` fault whose count is not a number.
    #[error("`{fault}`: {error}")]
    Count {
        fault: String,
        #[source]
        error: std::num::ParseIntError,
    },
}

impl FromStr for TesteeFault {
    type Err = FaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let after = |n: &str| n.parse::<usize>().map_err(|error| FaultError::Count { fault: s.to_string(), error });
        Ok(match s.split_once('=') {
            None => match s {
                "flip-accept" => TesteeFault::FlipAccept,
                "wrong-class" => TesteeFault::WrongClass,
                "wrong-view" => TesteeFault::WrongView,
                "drop-drift" => TesteeFault::DropDrift,
                "corrupt-encode" => TesteeFault::CorruptEncode,
                "skip-encode" => TesteeFault::SkipEncode,
                _ => return Err(FaultError::Unknown(s.to_string())),
            },
            Some(("crash-after", n)) => TesteeFault::CrashAfter(after(n)?),
            Some(("hang-after", n)) => TesteeFault::HangAfter(after(n)?),
            Some(("garbage-after", n)) => TesteeFault::GarbageAfter(after(n)?),
            Some(("flood-after", n)) => TesteeFault::FloodAfter(after(n)?),
            Some(_) => return Err(FaultError::Unknown(s.to_string())),
        })
    }
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A request could not be framed.
    #[error("cannot read a request: {0}")]
    Read(#[source] FrameError),
    /// An answer could not be written (or flushed).
    #[error("{0}")]
    Write(#[source] std::io::Error),
    /// The runner closed the pipe while the `flood-after` fault wrote.
    #[error("the runner closed the pipe during the flood")]
    FloodClosed,
}

/// How serving ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// End of input at a message boundary: exit 0.
    EndOfInput,
    /// The `crash-after` fault: exit with status 3.
    Crash,
}

/// The handshake answer of the reference implementation.
pub fn hello() -> Hello {
    let versions: Vec<String> = ALL_RELEASES.iter().map(|r| format!("{} {}", r.dialect, r.version)).collect();
    Hello {
        protocol: PROTOCOL,
        implementation: format!("engine-protocol (conformance {})", env!("CARGO_PKG_VERSION")),
        supports: ALL_RELEASES
            .iter()
            .map(|r| Support {
                dialect: r.dialect.as_str().into(),
                version: r.version.into(),
                messages: message_names_in(r),
            })
            .collect(),
        unsupported: Some(format!("engine-protocol has schema tables for {} only", versions.join(", "))),
    }
}

/// Serves requests from `input` until its end, answering on `output`.
/// Errors: a request that cannot be framed, or output that cannot be
/// written.
pub fn serve(input: impl Read, output: impl Write, fault: Option<TesteeFault>) -> Result<Ending, ServeError> {
    let mut input = std::io::BufReader::new(input);
    let mut output = std::io::BufWriter::new(output);
    let mut served = 0usize;
    loop {
        let body = match read_message(&mut input) {
            Ok(b) => b,
            Err(FrameError::End) => return Ok(Ending::EndOfInput),
            Err(e) => return Err(ServeError::Read(e)),
        };
        let request = parse_message(&body);
        let is_hello = request.as_ref().is_ok_and(|r| r.get("hello").is_some());
        if !is_hello {
            let limit = match fault {
                Some(
                    TesteeFault::CrashAfter(n)
                    | TesteeFault::HangAfter(n)
                    | TesteeFault::GarbageAfter(n)
                    | TesteeFault::FloodAfter(n),
                ) => Some(n),
                _ => None,
            };
            if limit == Some(served) {
                match fault {
                    Some(TesteeFault::CrashAfter(_)) => return Ok(Ending::Crash),
                    Some(TesteeFault::HangAfter(_)) => loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    },
                    Some(TesteeFault::FloodAfter(_)) => {
                        let len = u32::try_from(MAX_MESSAGE).unwrap_or(u32::MAX);
                        let junk = [b'x'; 64 * 1024];
                        let _ = output.write_all(&len.to_le_bytes());
                        // Until the runner closes the pipe.
                        while output.write_all(&junk).is_ok() {}
                        return Err(ServeError::FloodClosed);
                    }
                    _ => {
                        write_message(&mut output, b"}{ this is not JSON").map_err(ServeError::Write)?;
                        output.flush().map_err(ServeError::Write)?;
                        served += 1;
                        continue;
                    }
                }
            }
            served += 1;
        }
        let answer = match request {
            Ok(r) => answer(&r, fault),
            Err(why) => json!({"error": format!("the request is not a JSON object: {why}")}),
        };
        write_message(&mut output, answer.to_string().as_bytes()).map_err(ServeError::Write)?;
        output.flush().map_err(ServeError::Write)?;
    }
}

/// The answer to one request.
pub fn answer(request: &Json, fault: Option<TesteeFault>) -> Json {
    if request.get("hello").is_some() {
        return hello().to_json();
    }
    let (key, body) = match (request.get("decode"), request.get("encode")) {
        (Some(b), None) => ("decode", b),
        (None, Some(b)) => ("encode", b),
        _ => return json!({"skipped": "not a request this testee knows (it knows hello, decode and encode)"}),
    };
    let field = |k: &str| body.get(k).and_then(Json::as_str);
    let (Some(dialect), Some(version), Some(message)) = (field("dialect"), field("version"), field("message")) else {
        return json!({"error": format!("`{key}` needs string `dialect`, `version` and `message`")});
    };
    let Some(rel) = dialect.parse::<Dialect>().ok().and_then(|d| release(d, version).ok()) else {
        return json!({"skipped": format!("no schema table for {dialect} {version}")});
    };
    let Some(kind) = MessageKind::parse(message) else {
        return json!({"skipped": format!("message type `{message}` is not implemented")});
    };
    let ty = kind.payload_type(rel);
    if key == "encode" {
        if fault == Some(TesteeFault::SkipEncode) {
            return json!({"skipped": "this testee only decodes"});
        }
        let Some(view) = body.get("value") else { return json!({"error": "`encode` needs a `value`"}) };
        return match from_view_in(rel, kind.name_in(rel), ty, view).and_then(|v| encode_message(rel, kind, &v)) {
            Ok(mut frames) => {
                if fault == Some(TesteeFault::CorruptEncode) {
                    if let Some(b) = frames.last_mut().and_then(|f| f.last_mut()) {
                        *b ^= 0xff;
                    }
                }
                json!({"frames": frames.iter().map(hex::encode).collect::<Vec<_>>()})
            }
            Err(e) => json!({"reject": e.class.as_str(), "detail": reject_detail(&e)}),
        };
    }
    let frames = match body.get("frames").and_then(Json::as_array) {
        Some(xs) => xs
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let s = x.as_str().ok_or(format!("frames[{i}] is not a string"))?;
                hex::decode(s).map_err(|e| format!("frames[{i}] is not hex: {e}"))
            })
            .collect::<Result<Vec<_>, String>>(),
        None => Err("`decode` needs `frames`, an array of hex strings".into()),
    };
    let frames = match frames {
        Ok(f) => f,
        Err(why) => return json!({"error": why}),
    };
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    match (decode_message(rel, kind, &refs, &Limits::default()), fault) {
        (Ok(_), Some(TesteeFault::FlipAccept)) => json!({"reject": "validation", "detail": "the flip-accept fault"}),
        (Err(_), Some(TesteeFault::FlipAccept)) => json!({"accept": {"value": null}}),
        (Ok(d), _) => {
            let mut view = to_view(ty, &d.value);
            let drift = if fault == Some(TesteeFault::DropDrift) { vec![] } else { d.drift };
            if fault == Some(TesteeFault::WrongView) {
                match &mut view {
                    Json::Object(m) => {
                        m.insert("wrong_view_fault".into(), json!(true));
                    }
                    Json::Array(xs) => xs.push(json!("wrong-view fault")),
                    other => *other = json!("wrong-view fault"),
                }
            }
            json!({"accept": {"value": view, "drift": drift}})
        }
        (Err(e), Some(TesteeFault::WrongClass)) => {
            let other = if e.class == RejectClass::Malformed { RejectClass::Type } else { RejectClass::Malformed };
            json!({"reject": other.as_str(), "detail": "the wrong-class fault"})
        }
        (Err(e), _) => json!({"reject": e.class.as_str(), "detail": reject_detail(&e)}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testee::framed;

    fn run(requests: &[Json], fault: Option<TesteeFault>) -> (Vec<Json>, Ending) {
        let input: Vec<u8> = requests.iter().flat_map(|r| framed(r.to_string().as_bytes())).collect();
        let mut output = Vec::new();
        let ending = serve(input.as_slice(), &mut output, fault).unwrap();
        let mut answers = Vec::new();
        let mut rest = output.as_slice();
        while let Ok(body) = read_message(&mut rest) {
            answers.push(parse_message(&body).unwrap());
        }
        (answers, ending)
    }

    fn decode_abort(frames: &[&str]) -> Json {
        json!({"case": "c", "decode": {"dialect": "vllm", "version": "0.33.0", "message": "AbortRequest", "frames": frames}})
    }

    #[test]
    fn the_reference_testee_answers_hello_decode_and_encode() {
        let encode = json!({"case": "c", "encode": {"dialect": "vllm", "version": "0.33.0", "message": "AbortRequest", "value": ["a"]}});
        let (answers, ending) = run(
            &[json!({"hello": {"protocol": 1}}), decode_abort(&["01", "90"]), decode_abort(&["01", "c1"]), encode],
            None,
        );
        assert_eq!(ending, Ending::EndOfInput);
        assert_eq!(answers[0]["hello"]["protocol"], json!(1));
        assert_eq!(answers[1], json!({"accept": {"value": [], "drift": []}}));
        assert_eq!(answers[2]["reject"], json!("malformed"));
        assert_eq!(answers[3], json!({"frames": ["01", "91a161"]}));
    }

    #[test]
    fn an_unknown_release_or_request_is_skipped_and_bad_hex_is_an_error() {
        let old = json!({"case": "c", "decode": {"dialect": "vllm", "version": "0.1.0", "message": "AbortRequest", "frames": []}});
        let (answers, _) = run(&[old, json!({"case": "c", "translate": {}}), decode_abort(&["zz"])], None);
        assert!(answers[0]["skipped"].as_str().unwrap().contains("0.1.0"));
        assert!(answers[1]["skipped"].is_string());
        assert!(answers[2]["error"].as_str().unwrap().contains("not hex"));
    }

    #[test]
    fn crash_after_serves_that_many_requests_and_stops_without_answering() {
        let hello = json!({"hello": {"protocol": 1}});
        let (answers, ending) =
            run(&[hello, decode_abort(&["01", "90"]), decode_abort(&["01", "90"])], Some(TesteeFault::CrashAfter(1)));
        assert_eq!(ending, Ending::Crash);
        assert_eq!(answers.len(), 2, "the hello and one decode");
    }

    #[test]
    fn faults_parse_from_their_names() {
        assert_eq!("hang-after=5".parse::<TesteeFault>(), Ok(TesteeFault::HangAfter(5)));
        assert_eq!("flip-accept".parse::<TesteeFault>(), Ok(TesteeFault::FlipAccept));
        assert!("crash-after=x".parse::<TesteeFault>().is_err());
        assert!("explode".parse::<TesteeFault>().is_err());
    }
}
