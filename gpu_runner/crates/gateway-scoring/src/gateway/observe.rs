//! What the gateway under test did with one request, seen from both sides
//! (docs/runner/gateway.md "Scoring a gateway"): the HTTP response (a streamed one
//! put together by [`assemble_stream`]: `data:` payloads in order, the
//! first choice's text concatenated, its last non-null finish and stop
//! reason, the last usage, the first error event), and every message the
//! engine read, decoded and validated as vLLM 0.32.0's engine reads it
//! ([`observe_inputs`]; type byte `00` ADD, `01` ABORT, `03` UTILITY).

use std::collections::BTreeMap;
use std::time::Instant;

use engine_protocol::RequestType;
use engine_protocol::{decode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

use super::scenario::Endpoint;
use crate::http;

/// What one request produced on both sides.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub status: Option<u16>,
    pub body: Option<Json>,
    /// Transport failure or timeout (no response).
    pub error: Option<NoResponse>,
    /// ADDs the engine read: request id and the decoded request.
    pub adds: Vec<(String, StructValue)>,
    /// ABORTed request ids with when they arrived relative to the response
    /// (negative: before it).
    pub aborts: Vec<(String, f64)>,
    /// Messages that did not decode or validate, with the decoder's error.
    pub invalid: Vec<String>,
    /// Other messages (utility, waves): their type byte.
    pub other: Vec<u8>,
    /// Requests the engine finished itself, with the tokens it sent.
    pub engine_finished: Vec<(String, usize)>,
    pub seconds: f64,
    /// A streamed response (`stream: true`): the `data:` payloads in
    /// order; `body` is then the stream put together ([`assemble_stream`]).
    pub sse: Option<Vec<String>>,
    /// The gateway's process had exited by the end of the request's grace
    /// (`false` also when attached: then nobody knows).
    pub gateway_exited: bool,
}

/// Why a request got no HTTP response. The checks decide on the variant
/// (a client timeout is a hang, anything else a failure); reports show the
/// message.
#[derive(Debug, Clone)]
pub enum NoResponse {
    /// The HTTP client's failure.
    Http(http::HttpError),
    /// The blocking task that ran the client did not complete (it panicked
    /// or was cancelled).
    Task(String),
}

impl NoResponse {
    /// The client gave up waiting for a response (the gateway hung), as
    /// opposed to the connection failing.
    pub fn client_gave_up(&self) -> bool {
        matches!(self, NoResponse::Http(e) if e.is_timeout())
    }

    /// The client hung up on purpose (`client.close_after_events`).
    pub fn client_hung_up(&self) -> bool {
        matches!(self, NoResponse::Http(e) if e.is_closed_by_client())
    }

    /// Nothing was listening: the gateway is gone (or not serving HTTP).
    pub fn refused(&self) -> bool {
        matches!(self, NoResponse::Http(e) if e.is_refused())
    }
}

impl std::fmt::Display for NoResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoResponse::Http(e) => write!(f, "{e}"),
            NoResponse::Task(e) => f.write_str(e),
        }
    }
}

/// A streamed response put together as a non-streamed one, so the body
/// checks apply: per choice `index` (in index order; `n` > 1 streams
/// interleave their choices' chunks in no fixed order) the text
/// (completions `text`, chat `delta.content`) concatenated, its last
/// non-null `finish_reason`,
/// `stop_reason` and `matched_stop`, the last non-null `usage`, the first
/// `error` event, and under `_sse` the number of events and whether
/// `[DONE]` came once and last.
pub fn assemble_stream(ep: Endpoint, data: &[String]) -> Json {
    // Per choice `index` (n > 1 interleaves the choices' chunks in no
    // fixed order): its text, in arrival order, and its last non-null
    // finish fields.
    #[derive(Default)]
    struct Choice<'a> {
        text: String,
        fields: BTreeMap<&'a str, Json>,
    }
    let mut choices: BTreeMap<u64, Choice<'_>> = BTreeMap::new();
    let mut usage = Json::Null;
    let mut error = Json::Null;
    let mut not_json = 0;
    for d in data.iter().filter(|d| d.as_str() != "[DONE]") {
        let Ok(v) = serde_json::from_str::<Json>(d) else {
            not_json += 1;
            continue;
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            if error.is_null() {
                error = e.clone();
            }
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        for c in v.get("choices").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default() {
            let index = c.get("index").and_then(Json::as_u64).unwrap_or(0);
            let choice = choices.entry(index).or_default();
            let piece = match ep {
                Endpoint::Completions => c.get("text"),
                Endpoint::Chat => c.get("delta").and_then(|d| d.get("content")),
            };
            if let Some(t) = piece.and_then(Json::as_str) {
                choice.text.push_str(t);
            }
            for k in ["finish_reason", "stop_reason", "matched_stop"] {
                if let Some(x) = c.get(k).filter(|x| !x.is_null()) {
                    choice.fields.insert(k, x.clone());
                }
            }
        }
    }
    if choices.is_empty() {
        choices.insert(0, Choice::default());
    }
    let done = data.iter().filter(|d| d.as_str() == "[DONE]").count();
    let assembled: Vec<Json> = choices
        .into_iter()
        .map(|(index, Choice { text, mut fields })| {
            let mut choice = serde_json::Map::new();
            if index > 0 {
                choice.insert("index".into(), json!(index));
            }
            match ep {
                Endpoint::Completions => choice.insert("text".into(), Json::String(text)),
                Endpoint::Chat => choice.insert("message".into(), json!({"content": text})),
            };
            choice.insert("finish_reason".into(), fields.remove("finish_reason").unwrap_or(Json::Null));
            for (k, v) in fields {
                choice.insert(k.into(), v);
            }
            Json::Object(choice)
        })
        .collect();
    let mut body = json!({
        "choices": assembled,
        "usage": usage,
        "_sse": {"events": data.len(), "done": done, "done_last": data.last().map(String::as_str) == Some("[DONE]"), "not_json": not_json},
    });
    if !error.is_null() {
        body["error"] = error;
    }
    body
}

/// Decodes the input messages the engine read, as vLLM's engine would.
pub fn observe_inputs(
    release: &'static ReleaseSchema,
    inputs: &[mock_engine::vllm_script::InputRecord],
    response_at: Instant,
    obs: &mut Observed,
) {
    for rec in inputs {
        let slices: Vec<&[u8]> = rec.frames.iter().map(Vec::as_slice).collect();
        let Some(first) = slices.first() else { continue };
        let kind = match RequestType::from_frame(first) {
            Ok(RequestType::Add) => MessageKind::EngineCoreRequest,
            Ok(RequestType::Abort) => MessageKind::AbortRequest,
            Ok(RequestType::Utility) => MessageKind::UtilityRequest,
            Ok(RequestType::StartDpWave) => {
                obs.other.push(2);
                continue;
            }
            Err(e) => {
                obs.invalid.push(format!("request type frame {:02x?}: {e}", first));
                continue;
            }
        };
        match decode_message(release, kind, &slices, &Limits::default()) {
            Err(e) => obs.invalid.push(format!("{kind:?}: {e}")),
            Ok(d) => match (kind, d.value) {
                (MessageKind::EngineCoreRequest, Value::Struct(s)) => {
                    let id = s.str_field("request_id").unwrap_or("").to_string();
                    obs.adds.push((id, s));
                }
                (MessageKind::AbortRequest, Value::Array(xs)) => {
                    let dt = if rec.at >= response_at {
                        rec.at.duration_since(response_at).as_secs_f64()
                    } else {
                        -response_at.duration_since(rec.at).as_secs_f64()
                    };
                    for x in xs {
                        if let Value::Str(id) = x {
                            obs.aborts.push((id, dt));
                        }
                    }
                }
                _ => obs.other.push(first.first().copied().unwrap_or(0)),
            },
        }
    }
}
