//! Fast decoders for the two messages on a gateway's hot path, straight
//! from the frames to typed fields, no [`Value`] tree for what every
//! message carries:
//!
//! - [`decode_outputs`]: a borrowing decoder of `EngineCoreOutputs` for a
//!   gateway's output loop (below);
//! - [`decode_request`]: a direct decoder of `EngineCoreRequest` into the
//!   typed struct (for an engine, a mock engine or a recorder reading ADDs;
//!   `typed::decode_typed::<EngineCoreRequest>` runs it), with the verdicts
//!   of `decode_message` plus the typed conversion (module `request`);
//!   [`decode_request_shared`] the same on frames held as `bytes::Bytes`,
//!   a 0.34.0 prompt array then a view of its received frame (zero copy);
//! - [`tokenspeed::decode_batch`]: TokenSpeed's output batch straight into
//!   the typed `BatchTokenIDOutSlim`, with the result of the typed
//!   TokenSpeed API's `decode_typed`.
//!
//! [`decode_outputs`] gives the verdict [`decode_message`] gives on the same
//! frames and limits (accept or reject, the same reject class and error, the
//! same drift paths), and on accept the same field values, in another form:
//!
//! - `request_id` as a `&str` into the payload frame, `new_token_ids` as an
//!   [`IntRun`] (the msgpack integers, validated, iterated on demand),
//!   `finish_reason` as [`FinishReason`], `stop_reason` as a borrowed
//!   [`StopRef`], `num_nans_in_logits` as an `i64`;
//! - `new_logprobs` as three [`TensorRef`]s: dtype, shape and the bytes,
//!   borrowed from the payload (ext 3 or `bin`) or from the aux frame the
//!   index names;
//! - the batch's `engine_index`, `timestamp`, `wave_complete`, `start_wave`,
//!   `weight_version` as plain values;
//! - every other field that is not nil (`kv_transfer_params`,
//!   `trace_headers`, `events`, `prefill_stats`, the 0.33 `error`,
//!   `scheduler_stats`, `utility_output`, `finished_requests`, ...) through
//!   the schema-driven decoder on its own bytes, read by name and typed
//!   ([`Output::error`], [`Outputs::utility_output`], ...; module `owned`),
//!   and every field of the batch as the owned typed struct
//!   ([`Outputs::to_owned`]). So is an integer field holding a value above
//!   `i64::MAX` (legal on the wire, never sent by an engine): the borrowed
//!   field then keeps its default, `to_owned` has the value.
//!
//! How the verdict stays the same: the fields read here get the checks the
//! schema-driven decoder applies to them (types, UTF-8, the
//! `FinishReason` values, struct lengths, tensor dtype, shape and buffer
//! rules, aux indices, the tensor byte budget, the nesting limit counted the
//! same way, trailing bytes; docs/wire-protocol.md §6-§8, docs/limits.md),
//! and the other fields go through that decoder itself. Whatever this reader
//! does not accept is handed, whole, to [`decode_message`], whose error is
//! returned: error classes, paths and texts are its own. A message that
//! reports drift (an engine newer than the table: extra trailing elements,
//! unknown keys) is also decoded by [`decode_message`] for its drift paths,
//! in wire order; drift is rare, and that keeps one definition of it.
//!
//! Wire facts (docs/wire-protocol.md §8): `EngineCoreOutputs` is a positional
//! array of 9 fields (`engine_index, outputs, scheduler_stats, timestamp,
//! utility_output, finished_requests, wave_complete, start_wave,
//! weight_version`) in both tables; `EngineCoreOutput` is a positional array
//! of 18 fields in 0.32 and 19 in 0.33 (`error` appended), its first two
//! (`request_id`, `new_token_ids`) required; `LogprobsLists` is a named tuple
//! of three numpy tensors `[dtype, shape, data]` and an optional list.

mod owned;
pub(crate) mod request;
// The TokenSpeed batch decoder, whose public face is [`tokenspeed`] (its
// direct path alone is `crate::internal`'s).
#[path = "tokenspeed.rs"]
pub(crate) mod tokenspeed_direct;

/// TokenSpeed's output batch (`BatchTokenIDOutSlim`) read straight into the
/// typed struct, with the verdict, struct and drift of
/// `typed::tokenspeed::decode_typed` (docs/tokenspeed-wire.md §7).
pub mod tokenspeed {
    pub use super::tokenspeed_direct::decode_batch;
}

pub use request::{decode_request, decode_request_shared};

/// How `typed::decode_typed` reads each message: the direct decoder for
/// `EngineCoreRequest`, the reference path (`decode_typed_via_value`) for
/// the others (the structs sit below this module; it picks their decoder).
mod typed_decoders {
    use crate::decode::Limits;
    use crate::error::Error;
    use crate::schema::ReleaseSchema;
    use crate::typed::{
        decode_typed_via_value, DecodeFrames, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest,
        EngineHandshakeMetadata, HandshakeStatus, StartDpWave, UtilityOutput, UtilityRequest,
    };

    impl DecodeFrames for EngineCoreRequest {
        fn decode_frames(
            release: &'static ReleaseSchema,
            frames: &[&[u8]],
            limits: &Limits,
        ) -> Result<(Self, Vec<String>), Error> {
            super::request::decode_request_refs(release, frames, limits)
        }
    }

    macro_rules! via_value {
        ($($t:ident),*) => {$(
            impl DecodeFrames for $t {
                fn decode_frames(
                    release: &'static ReleaseSchema,
                    frames: &[&[u8]],
                    limits: &Limits,
                ) -> Result<(Self, Vec<String>), Error> {
                    decode_typed_via_value::<Self>(release, frames, limits)
                }
            }
        )*};
    }
    via_value!(
        EngineCoreOutputs,
        UtilityOutput,
        EngineCoreReadyResponse,
        HandshakeStatus,
        EngineHandshakeMetadata,
        UtilityRequest,
        StartDpWave
    );
}

use std::ops::Range;

use crate::decode::{check_tensor_shape, decode_sub, Limits};
use crate::error::{Error, RejectClass};
use crate::message::{decode_message, MessageKind};
use crate::msgpack::{Reader, Token};
use crate::schema::{vllm, ReleaseSchema, StructSchema, TensorKind, Ty};
use crate::typed::{FinishReason, StopReason};
use crate::value::{numpy_dtype, StructValue, Value};

/// The batch fields, by position (both tables).
const BATCH_FIELDS: [&str; 9] = [
    "engine_index",
    "outputs",
    "scheduler_stats",
    "timestamp",
    "utility_output",
    "finished_requests",
    "wave_complete",
    "start_wave",
    "weight_version",
];

/// The output fields read here, by position (both tables).
const OUTPUT_FIELDS: [(usize, &str); 5] =
    [(0, "request_id"), (1, "new_token_ids"), (2, "new_logprobs"), (5, "finish_reason"), (13, "num_nans_in_logits")];
const STOP_REASON: (usize, &str) = (6, "stop_reason");

/// A decoded `EngineCoreOutputs`, borrowing from its frames.
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs<'a> {
    pub engine_index: i64,
    pub outputs: Vec<Output<'a>>,
    /// `timestamp` (an integer on the wire is widened).
    pub timestamp: f64,
    pub wave_complete: Option<i64>,
    pub start_wave: Option<i64>,
    pub weight_version: Option<&'a str>,
    /// The other non-nil batch fields (`scheduler_stats`, `utility_output`,
    /// `finished_requests`, an integer above `i64::MAX`), as the
    /// schema-driven decoder decodes them: `(field position, value)`, in
    /// wire order. Read by name, typed: [`Outputs::utility_output`], ...,
    /// [`Outputs::to_owned`].
    pub(crate) other: owned::Rare,
    /// Drift paths, as [`decode_message`] reports them.
    pub drift: Vec<String>,
    pub(crate) table: owned::Table,
}

/// One `EngineCoreOutput`.
#[derive(Debug, Clone, PartialEq)]
pub struct Output<'a> {
    pub request_id: &'a str,
    pub new_token_ids: IntRun<'a>,
    pub new_logprobs: Option<Box<LogprobsRef<'a>>>,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopRef<'a>>,
    pub num_nans_in_logits: i64,
    /// The other non-nil fields, decoded by the schema-driven decoder:
    /// `(field position, value)`, in wire order. Read by name, typed:
    /// [`Output::error`], ..., [`Output::to_owned`].
    pub(crate) other: owned::Rare,
    /// Where the output's array lies in the payload frame (for
    /// [`decode_output_value`]).
    pub raw: Range<usize>,
    pub(crate) table: owned::Table,
}

/// `stop_reason`, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRef<'a> {
    TokenId(i64),
    Text(&'a str),
}

impl StopRef<'_> {
    pub fn to_owned(self) -> StopReason {
        match self {
            StopRef::TokenId(t) => StopReason::TokenId(i128::from(t)),
            StopRef::Text(s) => StopReason::Text(s.to_string()),
        }
    }
}

/// A validated run of MessagePack integers (each fits `i64`), borrowed from
/// the payload and decoded as it is iterated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntRun<'a> {
    bytes: &'a [u8],
    len: usize,
}

impl<'a> IntRun<'a> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> IntIter<'a> {
        IntIter { bytes: self.bytes, left: self.len }
    }

    /// Appends the integers to `out` (a buffer a caller reuses).
    pub fn extend_into(&self, out: &mut Vec<i64>) {
        out.reserve(self.len);
        out.extend(self.iter());
    }

    pub fn to_vec(&self) -> Vec<i64> {
        let mut v = Vec::with_capacity(self.len);
        v.extend(self.iter());
        v
    }

    /// The MessagePack bytes of the elements.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a> IntoIterator for IntRun<'a> {
    type Item = i64;
    type IntoIter = IntIter<'a>;
    fn into_iter(self) -> IntIter<'a> {
        self.iter()
    }
}

/// Iterates an [`IntRun`].
#[derive(Debug, Clone)]
pub struct IntIter<'a> {
    bytes: &'a [u8],
    left: usize,
}

impl Iterator for IntIter<'_> {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        if self.left == 0 {
            return None;
        }
        let (v, n) = read_int(self.bytes)?;
        self.bytes = &self.bytes[n..];
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for IntIter<'_> {}

/// One MessagePack integer that fits `i64` and its size; `None` for
/// anything else (a run holds only those, validated when it was read).
#[inline]
fn read_int(b: &[u8]) -> Option<(i64, usize)> {
    let m = *b.first()?;
    let be = |n: usize| -> Option<u64> {
        let s = b.get(1..1 + n)?;
        Some(s.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    };
    Some(match m {
        0x00..=0x7f => (m as i64, 1),
        0xe0..=0xff => (m as i8 as i64, 1),
        0xcc => (be(1)? as i64, 2),
        0xcd => (be(2)? as i64, 3),
        0xce => (be(4)? as i64, 5),
        0xcf => (i64::try_from(be(8)?).ok()?, 9),
        0xd0 => (be(1)? as u8 as i8 as i64, 2),
        0xd1 => (be(2)? as u16 as i16 as i64, 3),
        0xd2 => (be(4)? as u32 as i32 as i64, 5),
        0xd3 => (be(8)? as i64, 9),
        _ => return None,
    })
}

/// A tensor `[dtype, shape, data]`, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorRef<'a> {
    /// The dtype string as sent (`<i4`, `float32`).
    pub dtype: &'a str,
    /// The shape as sent (one dimension may be negative: inferred).
    pub shape: IntRun<'a>,
    /// The buffer: the ext-3 or `bin` body, or the whole aux frame.
    pub data: &'a [u8],
    /// The frame index when the data is an aux frame (0 is the payload).
    pub frame: Option<usize>,
}

impl TensorRef<'_> {
    /// The element size in bytes (the dtype was validated).
    pub fn item_size(&self) -> usize {
        numpy_dtype(self.dtype).map_or(1, |d| d.elem.size())
    }
}

/// `new_logprobs` (`LogprobsLists`), borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogprobsRef<'a> {
    pub logprob_token_ids: TensorRef<'a>,
    pub logprobs: TensorRef<'a>,
    pub sampled_token_ranks: TensorRef<'a>,
    pub cu_num_generated_tokens: Option<IntRun<'a>>,
}

/// Decodes the frames (`[payload, aux...]`) of one `EngineCoreOutputs` of
/// `release`, with the verdict of [`decode_message`] (module docs). For a
/// release whose tables do not have vLLM's layout (another dialect), a
/// message `decode_message` rejects gets its error and any other an error
/// saying so.
pub fn decode_outputs<'a>(
    release: &'static ReleaseSchema,
    frames: &'a [impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Outputs<'a>, Error> {
    crate::frames::with_frame_refs(frames, |frames| decode_outputs_refs(release, frames, limits))
}

/// [`decode_outputs`] on frames viewed as slices.
fn decode_outputs_refs<'a>(
    release: &'static ReleaseSchema,
    frames: &[&'a [u8]],
    limits: &Limits,
) -> Result<Outputs<'a>, Error> {
    let full = || decode_message(release, MessageKind::EngineCoreOutputs, frames, limits);
    let Some(batch) = tables(release) else {
        // A table of another shape: nothing here would be sure of it.
        full()?;
        return Err(Error::new(
            RejectClass::Type,
            "EngineCoreOutputs",
            "this release's EngineCoreOutputs table is not the one the fast decoder reads",
        ));
    };
    let mut p = Parser {
        r: Reader::new(frames.first().copied().unwrap_or_default()),
        base: 0,
        frames,
        limits,
        depth: 0,
        tensor_budget: 0,
        drift: false,
        batch,
        release,
    };
    match p.batch() {
        Ok(mut out) => {
            if p.drift {
                out.drift = full()?.drift;
            }
            Ok(out)
        }
        Err(Bail) => match full() {
            Err(e) => Err(e),
            // Never expected (the differential tests and the fuzz target
            // hold the two decoders to the same verdict); said plainly if it
            // happens.
            Ok(_) => Err(Error::new(
                RejectClass::Malformed,
                "EngineCoreOutputs",
                "the fast output decoder refused a batch the schema-driven decoder accepts (a bug)",
            )),
        },
    }
}

/// Decodes the whole output at `raw` (from [`Output::raw`]) of an accepted
/// batch as the schema-driven decoder does: the `StructValue` that
/// [`decode_message`] holds at that place in the batch.
pub fn decode_output_value(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    raw: Range<usize>,
    limits: &Limits,
) -> Result<StructValue, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let wrong = || Error::new(RejectClass::Malformed, "EngineCoreOutput", "not the bytes of one output");
        let ty = match tables(release).map(|b| b.fields[1].ty) {
            Some(Ty::List(inner)) => inner,
            _ => return Err(wrong()),
        };
        let budget = frames.iter().map(|f| f.len()).sum();
        let sub = decode_sub(ty, frames, raw.start, 2, budget, limits).map_err(|e| e.under("EngineCoreOutput"))?;
        match sub.value {
            Value::Struct(s) if sub.end == raw.end => Ok(s),
            _ => Err(wrong()),
        }
    })
}

/// The batch table, when it and the output table have the layout read
/// here (checked by name; the two vLLM tables are known to).
fn tables(release: &'static ReleaseSchema) -> Option<&'static StructSchema> {
    let batch = release.engine_core_outputs.as_struct()?;
    let known =
        std::ptr::eq(batch, &vllm::ENGINE_CORE_OUTPUTS_0_32) || std::ptr::eq(batch, &vllm::ENGINE_CORE_OUTPUTS_0_33);
    (known || layout_ok(batch, release.engine_core_output)).then_some(batch)
}

fn layout_ok(batch: &'static StructSchema, output: &'static StructSchema) -> bool {
    batch.fields.len() == BATCH_FIELDS.len()
        && batch.fields.iter().zip(BATCH_FIELDS).all(|(f, n)| f.name == n)
        && OUTPUT_FIELDS.iter().chain([&STOP_REASON]).all(|&(i, n)| output.fields.get(i).is_some_and(|f| f.name == n))
        && output.required() == 2
        // What `Parser::plain_tail` relies on.
        && output.fields.iter().enumerate().skip(2).all(|(i, f)| (i == 13) != matches!(f.ty, Ty::Optional(_)))
        && matches!(output.fields[13].ty, Ty::Int)
        && matches!(output.fields[5].ty, Ty::Optional(Ty::IntEnum(e)) if (0..=4).all(|v| e.contains(v)))
        && matches!(batch.fields[1].ty, Ty::List(Ty::Struct(s)) if std::ptr::eq(*s, output))
}

/// "Not read here": the message goes to the schema-driven decoder.
struct Bail;

type P<T> = Result<T, Bail>;

struct Parser<'a, 'f, 'l> {
    r: Reader<'a>,
    /// The payload position the reader started at.
    base: usize,
    frames: &'f [&'a [u8]],
    limits: &'l Limits,
    depth: usize,
    tensor_budget: usize,
    drift: bool,
    batch: &'static StructSchema,
    release: &'static ReleaseSchema,
}

#[inline]
fn utf8(b: &[u8]) -> P<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8. (Request ids are short ASCII
        // strings, for which the general check costs more than the rest of
        // reading them.)
        return Ok(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).map_err(|_| Bail)
}

impl<'a> Parser<'a, '_, '_> {
    #[inline]
    fn token(&mut self) -> P<Token<'a>> {
        self.r.token().map_err(|_| Bail)
    }

    /// An array header (fixarray read in place).
    #[inline]
    fn array_len(&mut self) -> P<u32> {
        match self.r.peek_byte() {
            Some(b @ 0x90..=0x9f) => {
                self.r.bump();
                Ok((b & 0x0f) as u32)
            }
            _ => match self.token()? {
                Token::Array(n) => Ok(n),
                _ => Err(Bail),
            },
        }
    }

    /// A `str` (fixstr read in place).
    #[inline]
    fn str(&mut self) -> P<&'a str> {
        let bytes = match self.r.peek_byte() {
            Some(b @ 0xa0..=0xbf) => {
                let at = self.pos() + 1;
                let end = at + (b & 0x1f) as usize;
                let payload: &'a [u8] = self.frames[0];
                let s = payload.get(at..end).ok_or(Bail)?;
                self.seek(end)?;
                s
            }
            _ => match self.token()? {
                Token::Str(s) => s,
                _ => return Err(Bail),
            },
        };
        utf8(bytes)
    }

    #[inline]
    fn enter(&mut self) -> P<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Bail);
        }
        Ok(())
    }

    #[inline]
    fn nil_next(&mut self) -> bool {
        if self.r.peek_byte() == Some(0xc0) {
            self.r.bump();
            true
        } else {
            false
        }
    }

    /// A declared element count the remaining input can hold (one byte
    /// each at least).
    #[inline]
    fn count(&self, n: u32) -> P<usize> {
        let n = n as usize;
        if n > self.r.remaining() {
            return Err(Bail);
        }
        Ok(n)
    }

    /// The payload position of the reader.
    #[inline]
    fn pos(&self) -> usize {
        self.base + self.r.position()
    }

    /// Moves the reader to payload position `pos`.
    fn seek(&mut self, pos: usize) -> P<()> {
        let payload: &'a [u8] = self.frames[0];
        self.r = Reader::new(payload.get(pos..).ok_or(Bail)?);
        self.base = pos;
        Ok(())
    }

    /// The value of `ty` at the reader through the schema-driven decoder.
    fn sub(&mut self, ty: &'static Ty) -> P<Value> {
        let sub =
            decode_sub(ty, self.frames, self.pos(), self.depth, self.tensor_budget, self.limits).map_err(|_| Bail)?;
        self.drift |= sub.drift;
        self.tensor_budget = sub.tensor_budget;
        self.seek(sub.end)?;
        Ok(sub.value)
    }

    fn batch(&mut self) -> P<Outputs<'a>> {
        let frames = self.frames;
        if frames.is_empty() || frames.len() > self.limits.max_frames {
            return Err(Bail);
        }
        if frames.iter().any(|f| f.len() > self.limits.max_frame_bytes) {
            return Err(Bail);
        }
        self.tensor_budget = frames.iter().map(|f| f.len()).sum();
        let schema = self.batch;
        let Token::Array(n) = self.token()? else { return Err(Bail) };
        self.enter()?;
        let n = self.count(n)?;
        let mut out = Outputs {
            engine_index: 0,
            outputs: Vec::new(),
            timestamp: 0.0,
            wave_complete: None,
            start_wave: None,
            weight_version: None,
            other: owned::Rare::default(),
            drift: Vec::new(),
            table: owned::Table(self.release),
        };
        let nf = schema.fields.len();
        for i in 0..n.min(nf) {
            let field = &schema.fields[i];
            if matches!(field.ty, Ty::Optional(_)) && self.nil_next() {
                continue;
            }
            match i {
                0 => match self.token()? {
                    Token::Int(v) => out.engine_index = v,
                    Token::UInt(v) => out.other.push((i, Value::UInt(v))),
                    _ => return Err(Bail),
                },
                1 => {
                    let Token::Array(k) = self.token()? else { return Err(Bail) };
                    let k = self.count(k)?;
                    self.enter()?;
                    // Every output takes 3 bytes at least (array header,
                    // request id, token list): no input reserves more than
                    // it could hold.
                    out.outputs.reserve_exact(k.min(self.r.remaining() / 3));
                    for _ in 0..k {
                        self.output(&mut out.outputs)?;
                    }
                    self.depth -= 1;
                }
                3 => {
                    out.timestamp = match self.token()? {
                        Token::F64(v) => v,
                        Token::F32(v) => v as f64,
                        Token::Int(v) => v as f64,
                        Token::UInt(v) => v as f64,
                        _ => return Err(Bail),
                    }
                }
                6 | 7 => {
                    let v = match self.token()? {
                        Token::Int(v) => Some(v),
                        Token::UInt(v) => {
                            out.other.push((i, Value::UInt(v)));
                            None
                        }
                        _ => return Err(Bail),
                    };
                    if i == 6 {
                        out.wave_complete = v;
                    } else {
                        out.start_wave = v;
                    }
                }
                8 => match self.token()? {
                    Token::Str(b) => out.weight_version = Some(utf8(b)?),
                    _ => return Err(Bail),
                },
                _ => {
                    let v = self.sub(field.ty)?;
                    out.other.push((i, v));
                }
            }
        }
        for _ in nf..n {
            self.r.skip_value().map_err(|_| Bail)?;
            self.drift = true;
        }
        if !self.r.is_empty() {
            return Err(Bail);
        }
        Ok(out)
    }

    /// Reads one output into a new last element of `outs` (built in place:
    /// an output is a dozen words, and moving it costs as much as reading
    /// it).
    fn output(&mut self, outs: &mut Vec<Output<'a>>) -> P<()> {
        let start = self.pos();
        let n = self.array_len()?;
        self.enter()?;
        let n = self.count(n)?;
        if n < 2 {
            return Err(Bail);
        }
        let schema = self.batch_output_schema();
        let nf = schema.fields.len();
        outs.push(Output {
            request_id: "",
            new_token_ids: IntRun::default(),
            new_logprobs: None,
            finish_reason: None,
            stop_reason: None,
            num_nans_in_logits: 0,
            other: owned::Rare::default(),
            raw: 0..0,
            table: owned::Table(self.release),
        });
        let Some(o) = outs.last_mut() else { return Err(Bail) };
        let m = n.min(nf);
        let mut i = 0;
        while i < m {
            if i == 2 && self.plain_tail(o, m)? {
                break;
            }
            let k = i;
            let field = &schema.fields[k];
            i += 1;
            if matches!(field.ty, Ty::Optional(_)) && self.nil_next() {
                continue;
            }
            match k {
                0 => o.request_id = self.str()?,
                1 => {
                    let at = self.pos();
                    match self.int_run()? {
                        Some(run) => o.new_token_ids = run,
                        None => {
                            self.seek(at)?;
                            let v = self.sub(field.ty)?;
                            o.other.push((k, v));
                        }
                    }
                }
                2 => {
                    let at = self.pos();
                    let (budget, depth) = (self.tensor_budget, self.depth);
                    match self.logprobs()? {
                        Some(l) => o.new_logprobs = Some(Box::new(l)),
                        None => {
                            self.seek(at)?;
                            self.depth = depth;
                            self.tensor_budget = budget;
                            let v = self.sub(field.ty)?;
                            o.other.push((k, v));
                        }
                    }
                }
                5 => match self.token()? {
                    Token::Int(v) => {
                        let allowed = matches!(field.ty, Ty::Optional(Ty::IntEnum(e)) if e.contains(v));
                        match FinishReason::from_wire(v) {
                            Some(r) if allowed => o.finish_reason = Some(r),
                            _ => return Err(Bail),
                        }
                    }
                    _ => return Err(Bail),
                },
                6 => match self.token()? {
                    Token::Int(v) => o.stop_reason = Some(StopRef::TokenId(v)),
                    Token::UInt(v) => o.other.push((k, Value::UInt(v))),
                    Token::Str(b) => o.stop_reason = Some(StopRef::Text(utf8(b)?)),
                    _ => return Err(Bail),
                },
                13 => match self.token()? {
                    Token::Int(v) => o.num_nans_in_logits = v,
                    Token::UInt(v) => o.other.push((k, Value::UInt(v))),
                    _ => return Err(Bail),
                },
                _ => {
                    let v = self.sub(field.ty)?;
                    o.other.push((k, v));
                }
            }
        }
        for _ in nf..n {
            self.r.skip_value().map_err(|_| Bail)?;
            self.drift = true;
        }
        self.depth -= 1;
        o.raw = start..self.pos();
        Ok(())
    }

    /// The common rest of an output, fields 2 to `m`: every one nil but
    /// `finish_reason` (nil or a `FinishReason` value) and
    /// `num_nans_in_logits` (a small non-negative integer), read in one
    /// pass over the bytes (`tables` checked that exactly those two are not
    /// optional or take these values). `false`: not that form, the field
    /// loop reads it.
    #[inline]
    fn plain_tail(&mut self, o: &mut Output<'a>, m: usize) -> P<bool> {
        let at = self.pos();
        let Some(rest) = self.frames[0].get(at..at + (m - 2)) else { return Ok(false) };
        let (mut finish, mut nans) = (None, 0);
        for (j, &b) in rest.iter().enumerate() {
            match (j + 2, b) {
                (13, 0x00..=0x7f) => nans = b as i64,
                (13, _) => return Ok(false),
                (_, 0xc0) => {}
                (5, 0..=4) => finish = FinishReason::from_wire(b as i64),
                _ => return Ok(false),
            }
        }
        o.finish_reason = finish;
        o.num_nans_in_logits = nans;
        self.seek(at + (m - 2))?;
        Ok(true)
    }

    #[inline]
    fn batch_output_schema(&self) -> &'static StructSchema {
        match self.batch.fields[1].ty {
            Ty::List(Ty::Struct(s)) => s,
            // `tables` checked the layout.
            _ => self.batch,
        }
    }

    /// A `list[int]`: the run, or `None` when an element is above
    /// `i64::MAX` (the caller then takes the schema-driven decoder's value).
    fn int_run(&mut self) -> P<Option<IntRun<'a>>> {
        let n = self.array_len()?;
        let n = self.count(n)?;
        self.enter()?;
        let start = self.pos();
        let mut wide = false;
        for _ in 0..n {
            if self.r.small_int().is_some() {
                continue;
            }
            match self.token()? {
                Token::Int(_) => {}
                Token::UInt(_) => wide = true,
                _ => return Err(Bail),
            }
        }
        self.depth -= 1;
        if wide {
            return Ok(None);
        }
        let bytes = &self.frames[0][start..self.pos()];
        Ok(Some(IntRun { bytes, len: n }))
    }

    /// `LogprobsLists`, or `None` for a form read by the schema-driven
    /// decoder instead (more than 8 dimensions, an integer above
    /// `i64::MAX`).
    fn logprobs(&mut self) -> P<Option<LogprobsRef<'a>>> {
        let Token::Array(n) = self.token()? else { return Err(Bail) };
        self.enter()?;
        let n = self.count(n)?;
        if !(3..=4).contains(&n) {
            return Err(Bail);
        }
        let Some(logprob_token_ids) = self.tensor()? else { return Ok(None) };
        let Some(logprobs) = self.tensor()? else { return Ok(None) };
        let Some(sampled_token_ranks) = self.tensor()? else { return Ok(None) };
        let mut cu_num_generated_tokens = None;
        if n == 4 && !self.nil_next() {
            match self.int_run()? {
                Some(run) => cu_num_generated_tokens = Some(run),
                None => return Ok(None),
            }
        }
        self.depth -= 1;
        Ok(Some(LogprobsRef { logprob_token_ids, logprobs, sampled_token_ranks, cu_num_generated_tokens }))
    }

    /// A numpy tensor, or `None` for more than 8 dimensions.
    fn tensor(&mut self) -> P<Option<TensorRef<'a>>> {
        if self.token()? != Token::Array(3) {
            return Err(Bail);
        }
        self.enter()?;
        let Token::Str(d) = self.token()? else { return Err(Bail) };
        let dtype = utf8(d)?;
        let Some(parsed) = numpy_dtype(dtype) else { return Err(Bail) };
        let Token::Array(dims) = self.token()? else { return Err(Bail) };
        let dims = self.count(dims)?;
        let start = self.pos();
        let mut shape = [0i64; 8];
        for i in 0..dims {
            let Token::Int(x) = self.token()? else { return Err(Bail) };
            if i < shape.len() {
                shape[i] = x;
            }
        }
        if dims > shape.len() {
            return Ok(None);
        }
        let shape_run = IntRun { bytes: &self.frames[0][start..self.pos()], len: dims };
        let (data, frame) = match self.token()? {
            Token::Ext(3, b) | Token::Bin(b) => (b, None),
            Token::Int(i) if i >= 0 && (i as usize) < self.frames.len() => (self.frames[i as usize], Some(i as usize)),
            _ => return Err(Bail),
        };
        if check_tensor_shape(TensorKind::Numpy, &shape[..dims], data.len(), parsed.elem.size()).is_err() {
            return Err(Bail);
        }
        if data.len() > self.tensor_budget {
            return Err(Bail);
        }
        self.tensor_budget -= data.len();
        self.depth -= 1;
        Ok(Some(TensorRef { dtype, shape: shape_run, data, frame }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_typed_vllm_table_has_the_layout_the_fast_decoder_reads() {
        for v in ["0.32.0", "0.33.0", "0.34.0"] {
            let rel = crate::release(crate::schema::Dialect::Vllm, v).expect("table");
            let batch = rel.engine_core_outputs.as_struct().expect("struct");
            assert!(layout_ok(batch, rel.engine_core_output), "{v}");
        }
    }

    #[test]
    fn int_runs_decode_every_integer_form_that_fits_i64() {
        // 5, -3, 200 (cc), 1000 (cd), 70000 (ce), 2^40 (cf), -100 (d0),
        // -1000 (d1), -70000 (d2), -2^40 (d3).
        let bytes = [
            0x05, 0xfd, 0xcc, 200, 0xcd, 0x03, 0xe8, 0xce, 0x00, 0x01, 0x11, 0x70, 0xcf, 0, 0, 1, 0, 0, 0, 0, 0, 0xd0,
            0x9c, 0xd1, 0xfc, 0x18, 0xd2, 0xff, 0xfe, 0xee, 0x90, 0xd3, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0,
        ];
        let run = IntRun { bytes: &bytes, len: 10 };
        assert_eq!(run.to_vec(), [5, -3, 200, 1000, 70000, 1 << 40, -100, -1000, -70000, -(1i64 << 40)]);
        assert_eq!(run.iter().len(), 10);
    }
}
