//! Typed access to TokenSpeed's wire messages (the `--zmq-msgpack` dialect):
//! the structs generated from the TokenSpeed schema tables ([`generated`]),
//! whole-message decode and encode, the ABORT payload, and the output batch
//! as per-request rows. The structs are the union of the two wire versions
//! ([`RELEASES`]): release 0.1.1 and the older 08-03 wire
//! (`tokenspeed git-57b49061`, docs/tokenspeed-wire.md §12). A field only
//! one of them has is an `Option` whose docs name its release (the 08-03
//! request has no `data_parallel_rank`, its output batch no `engine_index`
//! and load tail, its ready response `block_size` where 0.1.1 has
//! `prefix_granularity`); encoding for a release that lacks a field that is
//! set is an error naming the field.
//!
//! Wire facts relied on (docs/tokenspeed-wire.md):
//! - the ADD payload [`TokenizedGenerateReqInput`] and the output batch
//!   [`BatchTokenIDOutSlim`] are tagged `array_like` structs: element 0 is
//!   the class name, the fields follow; an encoder writes every field (§3,
//!   §8). Trailing elements the tables do not know are drift, numbered by
//!   wire position with the tag as 0 (§3.4), and kept in `unknown`;
//! - [`SamplingParams`] (29 fields), `SessionParams`, `MultimodalInputs`
//!   and `MultimodalDataItem` are untagged `array_like` structs (§3.5);
//! - HELLO / READY ([`WireReadyMessage`]), INIT
//!   ([`WireHandshakeInitMessage`]) and the ready response
//!   ([`WireEngineCoreReadyResponse`], 19 fields, so a `map16` header) are
//!   map structs with every field written (§4, §8);
//! - ABORT is `[0x01, array of rids]` (§2);
//! - the output batch is columnar: one entry per row in every column, a
//!   finish string `""` while the request runs, cumulative token counts,
//!   then `engine_index` and the load tail `num_running`, `num_waiting`,
//!   `kv_active_pages`, `kv_total_pages` (§7.1). msgspec does not compare
//!   column lengths (§7.2): [`BatchTokenIDOutSlim::rows`] does, and refuses
//!   a ragged batch with a [`RaggedBatch`] naming the column.
//!
//! A gateway's codec path: an ADD written from the struct, an ABORT, and
//! an output batch read straight into the struct
//! ([`decode_batch`](crate::hot::tokenspeed::decode_batch)) and
//! split into per-request rows (here the batch is built from rows, as the
//! runner's mock engine builds it):
//!
//! ```
//! use engine_protocol::hot::tokenspeed::decode_batch;
//! use engine_protocol::typed::tokenspeed::{
//!     encode_abort, BatchRow, BatchTokenIDOutSlim, Finish, LoadTail, Rid, SamplingParams,
//!     TokenizedGenerateReqInput,
//! };
//! use engine_protocol::{release, Dialect, Limits};
//!
//! let ts = release(Dialect::TokenSpeed, "0.1.1").expect("a known release");
//! let add = TokenizedGenerateReqInput {
//!     rid: Some(Rid::One("r1".into())),
//!     input_ids: Some(vec![1, 2, 3].into()),
//!     sampling_params: SamplingParams { max_new_tokens: Some(8), temperature: 0.0, ..SamplingParams::default() },
//!     stream: true,
//!     ..TokenizedGenerateReqInput::default()
//! };
//! let frames = add.encode(ts)?; // [type byte 00, payload]
//! assert_eq!(frames[0], [0x00]);
//! assert_eq!(encode_abort(&["r1"])[0], [0x01]);
//!
//! let row = BatchRow { rid: "r1".into(), output_ids: vec![7].into(), finish: Finish::Length, ..BatchRow::default() };
//! let batch = BatchTokenIDOutSlim::from_rows(&[row], 0, LoadTail::default()).encode(ts)?;
//! let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
//! let (batch, drift) = decode_batch(ts, &refs, &Limits::default())?;
//! assert!(drift.is_empty());
//! for row in batch.into_rows()? {
//!     assert_eq!((row.rid.as_str(), row.output_ids.as_i64()), ("r1", Some(&[7][..])));
//!     assert!(row.finish.is_terminal());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Decoding ([`decode_typed`]) has the verdicts and drift of
//! [`crate::decode_message_with`] (and so runs TokenSpeed's receive path
//! when given an engine configuration); encoding is the direct encoder of
//! the vLLM typed API (`crate::typed::wire`), byte-identical to
//! TokenSpeed's encoder on the `encode: exact` goldens.
#![warn(missing_docs)]

#[rustfmt::skip]
#[path = "tokenspeed_generated.rs"]
pub mod generated;

pub use generated::*;

use crate::decode::{decode_payload, Limits};
use crate::error::{Error, RejectClass};
use crate::message::{decode_message, decode_message_with, MessageKind};
use crate::schema::{tokenspeed as tables, ReleaseSchema, Ty};
use crate::validate::tokenspeed::EngineConfig;
use crate::value::{StructValue, Value};

use super::wire::{self, At, Enc, IntEnum, Rel, WireType};
use super::IntList;

/// The TokenSpeed releases the typed structs are generated over, in the
/// order of the generated per-release tables (oldest first).
pub static RELEASES: &[&ReleaseSchema] = &[&tables::GIT_57B49061, &tables::V0_1_1];

/// `tokenspeed.runtime.multimodal.inputs.Modality`: 1 IMAGE, 2 VIDEO,
/// 3 AUDIO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Modality {
    /// 1: an image.
    Image = 1,
    /// 2: a video.
    Video = 2,
    /// 3: audio.
    Audio = 3,
}

impl IntEnum for Modality {
    const NAME: &'static str = "Modality";
    fn from_wire(v: i64) -> Option<Self> {
        Some(match v {
            1 => Modality::Image,
            2 => Modality::Video,
            3 => Modality::Audio,
            _ => return None,
        })
    }
    fn wire(self) -> i64 {
        self as i64
    }
}

wire::int_enum_wire!(Modality);

/// `TokenizedGenerateReqInput.rid`: `str | list[str]` (nil aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rid {
    /// One request id (what a gateway sends).
    One(String),
    /// One id per request of a batched request (the engine drops such a
    /// request unless it is seeded: docs/tokenspeed-wire.md §5.1).
    Many(Vec<String>),
}

impl Rid {
    /// The single id, if it is one.
    pub fn as_one(&self) -> Option<&str> {
        match self {
            Rid::One(s) => Some(s),
            Rid::Many(_) => None,
        }
    }
}

impl WireType for Rid {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Str(s) => Ok(Rid::One(s.clone())),
            Value::Array(_) => Ok(Rid::Many(WireType::from_value(v, raw, rel)?)),
            other => Err(wire::type_error("str | list[str]", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(match self {
            Rid::One(s) => Value::Str(s.clone()),
            Rid::Many(xs) => Value::Array(xs.iter().cloned().map(Value::Str).collect()),
        })
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> wire::EncodeResult {
        match self {
            Rid::One(s) => s.encode(rel, e),
            Rid::Many(xs) => xs.encode(rel, e),
        }
    }
}

/// `release` as the generated code sees it; an error for a table that is
/// not one of [`RELEASES`].
fn rel(release: &'static ReleaseSchema) -> Result<Rel, Error> {
    RELEASES
        .iter()
        .position(|r| std::ptr::eq(*r, release) || (r.dialect == release.dialect && r.version == release.version))
        .map(|i| Rel { schema: release, bit: 1 << i })
        .ok_or_else(|| {
            Error::new(
                RejectClass::Validation,
                "",
                format!("no typed TokenSpeed API for {} {}", release.dialect, release.version),
            )
        })
}

/// A generated TokenSpeed struct that is a whole message.
pub trait TokenSpeedMessage: WireType {
    /// The message kind it is sent as (`WireReadyMessage` is HELLO and
    /// READY alike; its kind here is HELLO).
    const KIND: MessageKind;
    /// The root of error paths.
    const NAME: &'static str;
}

macro_rules! message {
    ($t:ident, $kind:ident) => {
        impl TokenSpeedMessage for $t {
            const KIND: MessageKind = MessageKind::$kind;
            const NAME: &'static str = stringify!($t);
        }

        impl $t {
            /// From a decoded value of `release` (as [`crate::decode_message`]
            /// returns it); errors name the path of the field. A value holds
            /// no unknown fields: [`decode_typed`] keeps them.
            pub fn from_value(release: &'static ReleaseSchema, v: &Value) -> Result<Self, Error> {
                <Self as WireType>::from_value(v, None, rel(release)?).map_err(|e| e.under(Self::NAME))
            }

            /// To a value of `release`, for [`crate::encode_message`];
            /// unknown fields are left out.
            pub fn to_value(&self, release: &'static ReleaseSchema) -> Result<Value, Error> {
                <Self as WireType>::to_value(self, MessageKind::$kind.payload_type(release), rel(release)?)
                    .map_err(|e| e.under(Self::NAME))
            }

            /// The frames of this message for `release`, written straight
            /// from the struct (request-type byte first for input-socket
            /// messages, aux frames after the payload).
            pub fn encode(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
                let rel = rel(release)?;
                let mut e = Enc::new(Vec::with_capacity(256));
                <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME))?;
                let mut frames = Vec::with_capacity(2 + e.aux.len());
                if let Some(t) = MessageKind::$kind.request_type() {
                    frames.push(vec![t.byte()]);
                }
                let aux = e.aux_owned();
                frames.push(e.out);
                frames.extend(aux);
                Ok(frames)
            }
        }
    };
}

message!(TokenizedGenerateReqInput, EngineCoreRequest);
message!(BatchTokenIDOutSlim, EngineCoreOutputs);
message!(WireEngineCoreReadyResponse, EngineCoreReadyResponse);
message!(WireReadyMessage, HandshakeHello);
message!(WireHandshakeInitMessage, HandshakeInit);

/// Decodes one message as `M`, with the verdict and drift of
/// [`decode_message`] (the schema decoder only: TokenSpeed's receive path
/// is [`decode_typed_with`]). Unknown fields reported as drift are kept in
/// the structs' `unknown`.
pub fn decode_typed<M: TokenSpeedMessage>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let d = decode_message(release, M::KIND, frames, limits)?;
        finish_decode(release, frames, limits, d.value, d.drift)
    })
}

/// [`decode_typed`] with the engine's receive path for `cfg`
/// ([`decode_message_with`]): a request the engine would refuse is an
/// error of class `validation`.
pub fn decode_typed_with<M: TokenSpeedMessage>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
    cfg: &EngineConfig,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let d = decode_message_with(release, M::KIND, frames, limits, cfg)?;
        finish_decode(release, frames, limits, d.value, d.drift)
    })
}

fn finish_decode<M: TokenSpeedMessage>(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    value: Value,
    drift: Vec<String>,
) -> Result<(M, Vec<String>), Error> {
    let rel = rel(release)?;
    let raw = if drift.is_empty() {
        None
    } else {
        static ANY: Ty = Ty::Any;
        let data = if M::KIND.request_type().is_some() { &frames[1..] } else { frames };
        // The schema-less decode counts one level more at a tensor (its
        // shape array): give it that level, so that finding the unknown
        // fields never refuses an accepted message.
        let raw_limits = Limits { max_depth: limits.max_depth.saturating_add(1), ..*limits };
        Some(decode_payload(M::NAME, &ANY, data, &raw_limits)?.value)
    };
    let m = M::from_value(&value, raw.as_ref(), rel).at(M::NAME)?;
    Ok((m, drift))
}

/// The frames of an ABORT: `[0x01, array of rids]` (docs/tokenspeed-wire.md
/// §2), the same as vLLM's ([`super::encode_abort`]).
pub fn encode_abort<S: AsRef<str>>(rids: &[S]) -> Vec<Vec<u8>> {
    super::encode_abort(rids)
}

/// The rids of an ABORT, with [`decode_message`]'s verdict.
pub fn decode_abort(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Vec<String>, Error> {
    crate::frames::with_frame_refs(frames, |frames| super::abort_ids(release, frames, limits, rel(release)?, "abort"))
}

static SAMPLING_PARAMS_TY: Ty = Ty::Struct(&tables::SAMPLING_PARAMS);

impl SamplingParams {
    /// To the decoded form of `release` (a struct of its table), for the
    /// receive-path functions of [`crate::validate::tokenspeed`], which
    /// work on [`StructValue`]s.
    pub fn to_struct(&self, release: &'static ReleaseSchema) -> Result<StructValue, Error> {
        match <Self as WireType>::to_value(self, &SAMPLING_PARAMS_TY, rel(release)?) {
            Ok(Value::Struct(s)) => Ok(s),
            Ok(_) => Err(Error::new(RejectClass::Type, "SamplingParams", "expected a struct")),
            Err(e) => Err(e.under("SamplingParams")),
        }
    }

    /// From a decoded `SamplingParams` of `release`.
    pub fn from_struct(release: &'static ReleaseSchema, s: &StructValue) -> Result<Self, Error> {
        let v = Value::Struct(s.clone());
        <Self as WireType>::from_value(&v, None, rel(release)?).map_err(|e| e.under("SamplingParams"))
    }
}

// ===== the output batch as rows =====

/// A row's finish reason: the string of `finished_reasons`
/// (docs/tokenspeed-wire.md §7.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Finish {
    /// `""`: the request is still running.
    #[default]
    Running,
    /// `"stop"`: EOS, a stop token or a stop string.
    Stop,
    /// `"length"`: `max_new_tokens` or the model length.
    Length,
    /// `"abort"`: aborted (or refused on the receive path).
    Abort,
    /// Any other string (passed through by the engine's `str()`).
    Other(String),
}

impl Finish {
    /// From its wire string.
    pub fn from_wire(s: &str) -> Finish {
        match s {
            "" => Finish::Running,
            "stop" => Finish::Stop,
            "length" => Finish::Length,
            "abort" => Finish::Abort,
            other => Finish::Other(other.to_string()),
        }
    }

    /// Its wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Finish::Running => "",
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Abort => "abort",
            Finish::Other(s) => s,
        }
    }

    /// Whether the row is the request's last (any finish but `""`).
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Finish::Running)
    }
}

/// One request's row of a [`BatchTokenIDOutSlim`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchRow {
    /// The request id (`rids`).
    pub rid: String,
    /// The ids generated since the request's previous row (`output_ids`).
    pub output_ids: IntList,
    /// `finished_reasons`.
    pub finish: Finish,
    /// `prompt_tokens` (cumulative).
    pub prompt_tokens: i128,
    /// `completion_tokens` (cumulative).
    pub completion_tokens: i128,
    /// `cached_tokens` (cumulative).
    pub cached_tokens: i128,
    /// `output_token_logprobs_val`: one logprob per entry of
    /// `logprob_ids`.
    pub logprob_vals: Vec<f64>,
    /// `output_token_logprobs_idx`.
    pub logprob_ids: IntList,
}

/// The batch's load tail (TokenSpeed 0.1.1 on, each defaulting to 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadTail {
    /// `num_running`.
    pub num_running: i128,
    /// `num_waiting`.
    pub num_waiting: i128,
    /// `kv_active_pages`.
    pub kv_active_pages: i128,
    /// `kv_total_pages`.
    pub kv_total_pages: i128,
}

/// A batch whose columns do not line up: `column` has `entries` entries
/// where `rows` were expected (the number of rids; inside a row, for
/// `output_token_logprobs_val[row]`, the number of logprob ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaggedBatch {
    /// The column (`output_ids`, ..., or `output_token_logprobs_val[i]`).
    pub column: String,
    /// Its length.
    pub entries: usize,
    /// The length it should have.
    pub rows: usize,
}

impl RaggedBatch {
    /// What is wrong, without the column (`3 entries for 2 rids`).
    pub fn detail(&self) -> String {
        if self.column.contains('[') {
            format!("{} values for {} ids", self.entries, self.rows)
        } else {
            format!("{} entries for {} rids", self.entries, self.rows)
        }
    }
}

impl std::fmt::Display for RaggedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BatchTokenIDOutSlim.{}: {}", self.column, self.detail())
    }
}

impl std::error::Error for RaggedBatch {}

impl From<RaggedBatch> for Error {
    fn from(r: RaggedBatch) -> Error {
        Error::new(RejectClass::Validation, format!("BatchTokenIDOutSlim.{}", r.column), r.detail() + " (ragged batch)")
    }
}

impl BatchTokenIDOutSlim {
    /// The per-request rows, in batch order. Every column must have one
    /// entry per rid (a nil `rids` counts as none), and each row as many
    /// logprob values as logprob ids; otherwise the first column that does
    /// not is named.
    pub fn rows(&self) -> Result<Vec<BatchRow>, RaggedBatch> {
        self.check_columns()?;
        let rids: &[String] = self.rids.as_deref().unwrap_or(&[]);
        Ok(rids
            .iter()
            .enumerate()
            .map(|(i, rid)| BatchRow {
                rid: rid.clone(),
                output_ids: self.output_ids[i].clone(),
                finish: Finish::from_wire(&self.finished_reasons[i]),
                prompt_tokens: self.prompt_tokens.get(i).unwrap_or_default(),
                completion_tokens: self.completion_tokens.get(i).unwrap_or_default(),
                cached_tokens: self.cached_tokens.get(i).unwrap_or_default(),
                logprob_vals: self.output_token_logprobs_val[i].clone(),
                logprob_ids: self.output_token_logprobs_idx[i].clone(),
            })
            .collect())
    }

    /// [`BatchTokenIDOutSlim::rows`], moving the columns into the rows
    /// rather than copying them.
    pub fn into_rows(self) -> Result<Vec<BatchRow>, RaggedBatch> {
        self.check_columns()?;
        let mut ids = self.output_ids.into_iter();
        let mut fin = self.finished_reasons.into_iter();
        let mut vals = self.output_token_logprobs_val.into_iter();
        let mut idx = self.output_token_logprobs_idx.into_iter();
        Ok(self
            .rids
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, rid)| BatchRow {
                rid,
                output_ids: ids.next().unwrap_or_default(),
                finish: Finish::from_wire(&fin.next().unwrap_or_default()),
                prompt_tokens: self.prompt_tokens.get(i).unwrap_or_default(),
                completion_tokens: self.completion_tokens.get(i).unwrap_or_default(),
                cached_tokens: self.cached_tokens.get(i).unwrap_or_default(),
                logprob_vals: vals.next().unwrap_or_default(),
                logprob_ids: idx.next().unwrap_or_default(),
            })
            .collect())
    }

    /// The ragged-batch checks of [`BatchTokenIDOutSlim::rows`].
    fn check_columns(&self) -> Result<(), RaggedBatch> {
        let n = self.rids.as_ref().map_or(0, Vec::len);
        let check = |column: &str, entries: usize| {
            if entries == n {
                Ok(())
            } else {
                Err(RaggedBatch { column: column.to_string(), entries, rows: n })
            }
        };
        check("output_ids", self.output_ids.len())?;
        check("finished_reasons", self.finished_reasons.len())?;
        check("prompt_tokens", self.prompt_tokens.len())?;
        check("completion_tokens", self.completion_tokens.len())?;
        check("cached_tokens", self.cached_tokens.len())?;
        check("output_token_logprobs_val", self.output_token_logprobs_val.len())?;
        check("output_token_logprobs_idx", self.output_token_logprobs_idx.len())?;
        for (i, (vals, ids)) in self.output_token_logprobs_val.iter().zip(&self.output_token_logprobs_idx).enumerate() {
            if vals.len() != ids.len() {
                return Err(RaggedBatch {
                    column: format!("output_token_logprobs_val[{i}]"),
                    entries: vals.len(),
                    rows: ids.len(),
                });
            }
        }
        Ok(())
    }

    /// A 0.1.1 batch of `rows` (in order) from engine `engine_index` with
    /// load tail `load`; `rids` is always written (never nil).
    pub fn from_rows(rows: &[BatchRow], engine_index: i64, load: LoadTail) -> BatchTokenIDOutSlim {
        BatchTokenIDOutSlim {
            engine_index: Some(i128::from(engine_index)),
            num_running: Some(load.num_running),
            num_waiting: Some(load.num_waiting),
            kv_active_pages: Some(load.kv_active_pages),
            kv_total_pages: Some(load.kv_total_pages),
            ..BatchTokenIDOutSlim::from_rows_08_03(rows)
        }
    }

    /// A batch of `rows` in the 08-03 shape (`tokenspeed git-57b49061`):
    /// the columns only, no `engine_index` and no load tail.
    pub fn from_rows_08_03(rows: &[BatchRow]) -> BatchTokenIDOutSlim {
        BatchTokenIDOutSlim {
            rids: Some(rows.iter().map(|r| r.rid.clone()).collect()),
            output_ids: rows.iter().map(|r| r.output_ids.clone()).collect(),
            finished_reasons: rows.iter().map(|r| r.finish.as_str().to_string()).collect(),
            prompt_tokens: int_column(rows.iter().map(|r| r.prompt_tokens)),
            completion_tokens: int_column(rows.iter().map(|r| r.completion_tokens)),
            cached_tokens: int_column(rows.iter().map(|r| r.cached_tokens)),
            output_token_logprobs_val: rows.iter().map(|r| r.logprob_vals.clone()).collect(),
            output_token_logprobs_idx: rows.iter().map(|r| r.logprob_ids.clone()).collect(),
            engine_index: None,
            num_running: None,
            num_waiting: None,
            kv_active_pages: None,
            kv_total_pages: None,
            unknown: Vec::new(),
        }
    }

    /// The load tail; `None` for a batch without one (the 08-03 wire).
    pub fn load(&self) -> Option<LoadTail> {
        Some(LoadTail {
            num_running: self.num_running?,
            num_waiting: self.num_waiting?,
            kv_active_pages: self.kv_active_pages?,
            kv_total_pages: self.kv_total_pages?,
        })
    }
}

/// A column of row integers. A value outside -2^63 ..= 2^64-1 (no wire
/// form) is left out, so that encoding the batch reports the column ragged.
fn int_column(xs: impl Iterator<Item = i128>) -> IntList {
    let mut out = IntList::new();
    for x in xs {
        let _ = out.push_wide(x);
    }
    out
}
