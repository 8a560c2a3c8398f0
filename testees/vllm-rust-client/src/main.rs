//! vLLM's Rust engine-core client (`vllm-engine-core-client`, from the Rust
//! workspace in vLLM 0.33.0's source distribution) as a testee of
//! docs/testee.md, and a bench of its codec on the inputs of docs/bench.md.
//!
//! ```text
//! vllm-rust-client-testee                 serve the testee protocol on stdin/stdout
//! vllm-rust-client-testee bench CASE.json...   time decode/encode, one line per case
//! ```
//!
//! What the client's public API offers, and so what this testee answers
//! (docs/testee.md §10):
//!
//! - decode: the client's typed deserializers (`protocol::decode_msgpack`
//!   into its `EngineCoreRequest`, `EngineCoreUtilityRequest`, the `&[String]`
//!   it sends as an ABORT, `UtilityOutput`, `EngineCoreReadyResponse`,
//!   `ReadyMessage` for HELLO and READY, `HandshakeInitMessage`), and
//!   `protocol::output::decode_engine_core_outputs` for output batches (aux
//!   frames resolved). The request-type frame is read with
//!   `EngineCoreRequestType::from_frame`.
//! - encode: `protocol::encode_msgpack` of the typed value (the request-type
//!   frame from `EngineCoreRequestType::to_frame`). The client moves large
//!   ADD tensors into aux frames with a crate-private method, so its public
//!   encoder writes them inline.
//! - StartDpWave: the client's payload type is private to its coordinator
//!   module: answered `skipped`.
//!
//! The client has no canonical view (docs/case-format.md §6), only typed
//! values; the bridge between the two is the reference implementation,
//! never in the verdict: an accepted decode is answered with the view of the
//! client's own re-encoding of what it decoded, read by `engine-protocol`'s
//! schema (a field the client drops or alters shows as a difference); an
//! encode request's view is first written to bytes by `engine-protocol`,
//! which the client then decodes and re-encodes. The client reports no
//! drift (it ignores fields it does not know); the drift answered is that of
//! its re-encoding. A client error is answered `reject` with a class read
//! from its message (`reject_class`), the message as detail. Where the
//! client accepts but its re-encoding is not a valid message of the release
//! (it writes nil for a string field, say), the answer is `error`, saying
//! so (the case fails, with that as its reason), unless the message is one
//! the reference rejects too: then the client's accept is answered with a
//! null view, and the case fails on the verdict.

use std::io::{BufReader, BufWriter, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use engine_protocol::view::{from_view, parse_json, to_view};
use engine_protocol::{Dialect, Limits, MessageKind, ReleaseSchema, decode_message, encode_message, release};
use serde_json::{Value as Json, json};
use vllm_engine_core_client::protocol::handshake::{EngineCoreReadyResponse, HandshakeInitMessage, ReadyMessage};
use vllm_engine_core_client::protocol::output::{EngineCoreOutputs, decode_engine_core_outputs};
use vllm_engine_core_client::protocol::request::{EngineCoreRequest, EngineCoreRequestType};
use vllm_engine_core_client::protocol::utility::{EngineCoreUtilityRequest, UtilityOutput};
use vllm_engine_core_client::protocol::{decode_msgpack, encode_msgpack};

mod bench;

/// vLLM's Rust binaries (`rust/src/cmd`) run on mimalloc; so does this one.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The one release whose source the client comes from (build.sh).
const DIALECT: &str = "vllm";
const VERSION: &str = "0.33.0";
/// docs/testee.md §2.2.
const MAX_MESSAGE: u32 = 1 << 30;
/// Client error messages carry a preview of the whole value; details are
/// cut to this many characters.
const MAX_DETAIL: usize = 400;

/// The message types of docs/case-format.md §4.1 the client has a public
/// type for.
const SUPPORTED: [&str; 9] = [
    "EngineCoreRequest",
    "AbortRequest",
    "UtilityRequest",
    "EngineCoreOutputs",
    "UtilityOutput",
    "EngineCoreReadyResponse",
    "HandshakeHello",
    "HandshakeInit",
    "HandshakeReady",
];

/// A message as the client holds it (one at a time, so the size of the
/// largest variant does not matter).
#[allow(clippy::large_enum_variant)]
pub enum Typed {
    Add(EngineCoreRequest),
    Abort(Vec<String>),
    Utility(EngineCoreUtilityRequest),
    Outputs(EngineCoreOutputs),
    UtilityOutput(UtilityOutput),
    ReadyResponse(EngineCoreReadyResponse),
    /// HELLO and READY: both `ReadyMessage` in the client.
    Ready(ReadyMessage),
    Init(HandshakeInitMessage),
}

/// Why the client refused: a reject class of docs/case-format.md §5.1 and
/// the client's message.
pub struct Refusal {
    pub class: &'static str,
    pub detail: String,
}

impl Refusal {
    fn new(class: &'static str, detail: impl Into<String>) -> Refusal {
        Refusal { class, detail: cut(detail.into()) }
    }

    fn from_client(e: vllm_engine_core_client::Error) -> Refusal {
        let text = e.to_string();
        Refusal::new(reject_class(&e, &text), text)
    }
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// The reject class for a client error: its variant, and for a decode
/// error the text rmp-serde and serde write (the part before the client's
/// `; value fallback:` preview).
fn reject_class(e: &vllm_engine_core_client::Error, text: &str) -> &'static str {
    use vllm_engine_core_client::Error as E;
    match e {
        E::UnsupportedField { .. } | E::InvalidStructuredOutputsParams { .. } => return "validation",
        E::UnsupportedAuxFrames { .. } => return "frames",
        E::ExtValueDecode { .. } => return "frames",
        E::ValueDecode(_) => return "malformed",
        _ => {}
    }
    let text = text.split("; value fallback:").next().unwrap_or(text);
    let has = |s: &str| text.contains(s);
    if has("depth limit exceeded") {
        "limits"
    } else if has("invalid structured outputs params") {
        "validation"
    } else if has("IO error while reading")
        || has("invalid utf8")
        || has("invalid UTF-8")
        || has("wrong msgpack marker Reserved")
    {
        "malformed"
    } else if has("missing field") || has("invalid length") || has("array had incorrect length") {
        "missing-field"
    } else if has("unknown variant") || has("expected variant") || has("expected one of") {
        "enum"
    } else {
        // "wrong msgpack marker", "invalid type", "invalid value" (a
        // negative number for an unsigned field), "numeric cast found out
        // of range", and whatever else serde reports about a value.
        "type"
    }
}

/// The request-type frame and the payload of an input-socket message.
fn input_frames(frames: &[Vec<u8>], expected: EngineCoreRequestType) -> Result<&[u8], Refusal> {
    let [kind, payload, ..] = frames else {
        return Err(Refusal::new("frames", format!("{} frame(s); a request-type frame and a payload", frames.len())));
    };
    match EngineCoreRequestType::from_frame(kind) {
        Some(t) if t == expected => Ok(payload),
        _ => Err(Refusal::new("frames", format!("request-type frame {} is not {:?}", hex::encode(kind), expected))),
    }
}

fn first(frames: &[Vec<u8>]) -> Result<&[u8], Refusal> {
    frames.first().map(Vec::as_slice).ok_or_else(|| Refusal::new("frames", "no payload frame"))
}

/// Decodes `frames` with the client's decoder for `message`; `None` for a
/// message type the client has no public type for.
pub fn client_decode(message: &str, frames: &[Vec<u8>]) -> Option<Result<Typed, Refusal>> {
    fn dec<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> Result<T, Refusal> {
        decode_msgpack(bytes).map_err(Refusal::from_client)
    }
    let decoded = || -> Result<Typed, Refusal> {
        Ok(match message {
            "EngineCoreRequest" => {
                let request: EngineCoreRequest = dec(input_frames(frames, EngineCoreRequestType::Add)?)?;
                request.validate().map_err(Refusal::from_client)?;
                Typed::Add(request)
            }
            "AbortRequest" => Typed::Abort(dec(input_frames(frames, EngineCoreRequestType::Abort)?)?),
            "UtilityRequest" => Typed::Utility(dec(input_frames(frames, EngineCoreRequestType::Utility)?)?),
            "EngineCoreOutputs" => {
                let frames: Vec<Bytes> = frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
                Typed::Outputs(decode_engine_core_outputs(&frames).map_err(Refusal::from_client)?)
            }
            "UtilityOutput" => Typed::UtilityOutput(dec(first(frames)?)?),
            "EngineCoreReadyResponse" => Typed::ReadyResponse(dec(first(frames)?)?),
            "HandshakeHello" | "HandshakeReady" => Typed::Ready(dec(first(frames)?)?),
            "HandshakeInit" => Typed::Init(dec(first(frames)?)?),
            _ => unreachable!("checked against SUPPORTED"),
        })
    };
    SUPPORTED.contains(&message).then(decoded)
}

/// Encodes a typed message with the client's encoder: the frames it sends
/// (the request-type frame first for input-socket messages).
pub fn client_encode(typed: &Typed) -> Result<Vec<Vec<u8>>, Refusal> {
    let with_type = |t: EngineCoreRequestType, payload: vllm_engine_core_client::Result<Vec<u8>>| {
        payload.map(|p| vec![t.to_frame().to_vec(), p])
    };
    let frames = match typed {
        Typed::Add(x) => with_type(EngineCoreRequestType::Add, encode_msgpack(x)),
        Typed::Abort(x) => with_type(EngineCoreRequestType::Abort, encode_msgpack(&x.as_slice())),
        Typed::Utility(x) => with_type(EngineCoreRequestType::Utility, encode_msgpack(x)),
        Typed::Outputs(x) => encode_msgpack(x).map(|p| vec![p]),
        Typed::UtilityOutput(x) => encode_msgpack(x).map(|p| vec![p]),
        Typed::ReadyResponse(x) => encode_msgpack(x).map(|p| vec![p]),
        Typed::Ready(x) => encode_msgpack(x).map(|p| vec![p]),
        Typed::Init(x) => encode_msgpack(x).map(|p| vec![p]),
    };
    frames.map_err(Refusal::from_client)
}

/// The frames of the original message that the client keeps as references
/// (aux frames of everything but an output batch, whose aux frames the
/// client resolves into the values).
fn kept_aux<'a>(message: &str, frames: &'a [Vec<u8>]) -> &'a [Vec<u8>] {
    let payload_at = match message {
        "EngineCoreRequest" | "AbortRequest" | "UtilityRequest" => 1,
        "EngineCoreOutputs" => return &[],
        _ => 0,
    };
    frames.get(payload_at + 1..).unwrap_or(&[])
}

/// The answer to a decode request.
fn decode_answer(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[Vec<u8>]) -> Json {
    let message = kind.name();
    let typed = match client_decode(message, frames) {
        None => return json!({"skipped": format!("vLLM's Rust client has no public type for {message}")}),
        Some(Err(r)) => return json!({"reject": r.class, "detail": r.detail}),
        Some(Ok(t)) => t,
    };
    let mut encoded = match client_encode(&typed) {
        Ok(f) => f,
        Err(r) => {
            return json!({"error": format!(
                "the client accepted the message but cannot encode what it read, so its view cannot be rendered: {}",
                r.detail
            )});
        }
    };
    encoded.extend(kept_aux(message, frames).iter().cloned());
    let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    match decode_message(rel, kind, &refs, &Limits::default()) {
        Ok(d) => json!({"accept": {"value": to_view(kind.payload_type(rel), &d.value), "drift": d.drift}}),
        Err(_) if !reference_accepts(rel, kind, frames) => {
            // The client accepts a message vLLM rejects: the verdict is what
            // is wrong, and there is no view to compare.
            json!({"accept": {"value": null}})
        }
        Err(e) => {
            // The client accepted a valid message, but what it writes back
            // for what it read is not a valid message of the release: its
            // view cannot be told.
            let payload = encoded.get(usize::from(kind.request_type().is_some())).map(hex::encode).unwrap_or_default();
            json!({"error": cut(format!(
                "the client accepted the message; its re-encoding of what it read is rejected by the \
                 {message} schema of vLLM {VERSION} ({} at {}: {}), so its view cannot be rendered; \
                 re-encoded payload {payload}",
                e.class.as_str(),
                e.path,
                e.detail
            ))})
        }
    }
}

/// Whether the reference accepts the original frames: only used to choose
/// how an accept of the client whose re-encoding cannot be read is answered.
fn reference_accepts(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[Vec<u8>]) -> bool {
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    decode_message(rel, kind, &refs, &Limits::default()).is_ok()
}

/// The answer to an encode request.
fn encode_answer(rel: &'static ReleaseSchema, kind: MessageKind, view: &Json) -> Json {
    let message = kind.name();
    if !SUPPORTED.contains(&message) {
        return json!({"skipped": format!("vLLM's Rust client has no public type for {message}")});
    }
    let reference = match from_view(message, kind.payload_type(rel), view).and_then(|v| encode_message(rel, kind, &v)) {
        Ok(f) => f,
        Err(e) => {
            return json!({"error": format!(
                "engine-protocol cannot write the value as bytes for the client to read ({:?} at {}: {})",
                e.class, e.path, e.detail
            )});
        }
    };
    let typed = match client_decode(message, &reference) {
        Some(Ok(t)) => t,
        Some(Err(r)) => {
            let detail = format!("the client cannot read the value (vLLM's bytes for it): {}", r.detail);
            return json!({"reject": r.class, "detail": cut(detail)});
        }
        None => unreachable!("checked against SUPPORTED"),
    };
    match client_encode(&typed) {
        Ok(frames) => json!({"frames": frames.iter().map(hex::encode).collect::<Vec<_>>()}),
        Err(r) => json!({"reject": r.class, "detail": r.detail}),
    }
}

fn hello() -> Json {
    json!({"hello": {
        "protocol": 1,
        "implementation": format!("vllm-engine-core-client (vLLM {VERSION} sdist)"),
        "supports": [{"dialect": DIALECT, "version": VERSION, "messages": SUPPORTED}],
        "unsupported": format!(
            "the client comes from vLLM {VERSION}'s sdist and is scored against that release only; \
             it has no public type for StartDpWave"
        ),
    }})
}

fn frames_of(body: &Json) -> Result<Vec<Vec<u8>>, String> {
    let xs = body.get("frames").and_then(Json::as_array).ok_or("`decode` needs `frames`, an array of hex strings")?;
    xs.iter()
        .enumerate()
        .map(|(i, x)| {
            let s = x.as_str().ok_or(format!("frames[{i}] is not a string"))?;
            hex::decode(s).map_err(|e| format!("frames[{i}] is not hex: {e}"))
        })
        .collect()
}

/// The answer to one request (docs/testee.md §4, §5).
fn answer(request: &Json) -> Json {
    if request.get("hello").is_some() {
        return hello();
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
    if (dialect, version) != (DIALECT, VERSION) {
        return json!({"skipped": format!("vLLM {VERSION}'s client is not scored against {dialect} {version}")});
    }
    let (Ok(rel), Some(kind)) = (release(Dialect::Vllm, version), MessageKind::parse(message)) else {
        return json!({"skipped": format!("no schema for {dialect} {version} {message} to render views with")});
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        if key == "decode" {
            match frames_of(body) {
                Ok(frames) => decode_answer(rel, kind, &frames),
                Err(why) => json!({"error": why}),
            }
        } else {
            match body.get("value") {
                Some(view) => encode_answer(rel, kind, view),
                None => json!({"error": "`encode` needs a `value`"}),
            }
        }
    }));
    result.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        json!({"error": format!("the client panicked: {what}")})
    })
}

#[derive(Debug)]
enum Read4 {
    Message(Vec<u8>),
    End,
}

/// One message of docs/testee.md §2.
fn read_message(input: &mut impl Read) -> Result<Read4, String> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(Read4::End),
            Ok(0) => return Err("end of input inside a length".into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let n = u32::from_le_bytes(len);
    if n > MAX_MESSAGE {
        return Err(format!("a message of {n} bytes (the limit is {MAX_MESSAGE})"));
    }
    let mut body = vec![0u8; n as usize];
    input.read_exact(&mut body).map_err(|e| format!("a message of {n} bytes ends early: {e}"))?;
    Ok(Read4::Message(body))
}

fn write_message(output: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let n = u32::try_from(body.len()).map_err(|_| std::io::Error::other("answer over 4 GiB"))?;
    output.write_all(&n.to_le_bytes())?;
    output.write_all(body)?;
    output.flush()
}

fn serve() -> Result<(), String> {
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    // The client's panics are caught and answered as errors; their message
    // goes to stderr, which the runner quotes.
    loop {
        let body = match read_message(&mut input)? {
            Read4::End => return Ok(()),
            Read4::Message(b) => b,
        };
        let request = std::str::from_utf8(&body)
            .map_err(|e| e.to_string())
            .and_then(|t| parse_json(t).map_err(String::from))
            .and_then(|j| if j.is_object() { Ok(j) } else { Err("not a JSON object".into()) });
        let answer = match request {
            Ok(r) => answer(&r),
            Err(why) => return Err(format!("cannot read a request: {why}")),
        };
        write_message(&mut output, answer.to_string().as_bytes()).map_err(|e| e.to_string())?;
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => serve(),
        Some("bench") => bench::main(&args[1..]),
        Some(other) => Err(format!(
            "unknown argument `{other}`\nusage: vllm-rust-client-testee            (serve docs/testee.md on stdin/stdout)\n       \
             vllm-rust-client-testee bench [--repeats N] [--batch-ms MS] CASE.json..."
        )),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vllm-rust-client-testee: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(version: &str, message: &str, frames: &[&str]) -> Json {
        answer(
            &json!({"case": "t", "decode": {"dialect": "vllm", "version": version, "message": message, "frames": frames}}),
        )
    }

    #[test]
    fn hello_declares_vllm_0_33_0_only_and_no_start_dp_wave() {
        let h = hello();
        let supports = h["hello"]["supports"].as_array().unwrap();
        assert_eq!(supports.len(), 1);
        assert_eq!(supports[0]["version"], "0.33.0");
        assert!(!supports[0]["messages"].as_array().unwrap().contains(&json!("StartDpWave")));
    }

    #[test]
    fn another_release_and_start_dp_wave_are_skipped_with_a_reason() {
        let a = decode("0.32.0", "AbortRequest", &["01", "90"]);
        assert!(a["skipped"].as_str().unwrap().contains("0.32.0"), "{a}");
        let w = decode("0.33.0", "StartDpWave", &["02", "9200c0"]);
        assert!(w["skipped"].as_str().unwrap().contains("StartDpWave"), "{w}");
    }

    #[test]
    fn an_abort_the_client_reads_is_answered_with_its_view() {
        // ["a"]: fixarray of one fixstr.
        let a = decode("0.33.0", "AbortRequest", &["01", "91a161"]);
        assert_eq!(a["accept"]["value"], json!(["a"]), "{a}");
    }

    #[test]
    fn client_errors_are_answered_with_a_reject_class() {
        // A truncated array (announces one element, has none).
        let t = decode("0.33.0", "AbortRequest", &["01", "91"]);
        assert_eq!(t["reject"], "malformed", "{t}");
        // A number where the list of ids belongs.
        let n = decode("0.33.0", "AbortRequest", &["01", "07"]);
        assert_eq!(n["reject"], "type", "{n}");
        // The wrong request-type frame.
        let f = decode("0.33.0", "AbortRequest", &["00", "90"]);
        assert_eq!(f["reject"], "frames", "{f}");
    }

    #[test]
    fn an_encode_answer_is_the_clients_frames() {
        let e = answer(
            &json!({"case": "t", "encode": {"dialect": "vllm", "version": "0.33.0", "message": "AbortRequest", "value": ["a"]}}),
        );
        assert_eq!(e["frames"], json!(["01", "91a161"]), "{e}");
    }

    #[test]
    fn framing_refuses_an_oversized_length_and_a_short_body() {
        let mut big: &[u8] = &[0, 0, 0, 0x41];
        assert!(read_message(&mut big).unwrap_err().contains("limit"));
        let mut short: &[u8] = &[4, 0, 0, 0, b'{'];
        assert!(read_message(&mut short).unwrap_err().contains("ends early"));
        let mut empty: &[u8] = &[];
        assert!(matches!(read_message(&mut empty), Ok(Read4::End)));
    }

    #[test]
    fn details_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_DETAIL);
        let c = cut(long);
        assert!(c.ends_with("...") && c.len() <= MAX_DETAIL + 3);
    }
}
