//! The schema-driven decoder: msgspec's tolerance, none of its silence.
//!
//! Behaviour (msgspec 0.23 as vLLM uses it; docs/wire-protocol.md §6):
//! - positional structs need at least their required prefix, fill missing
//!   trailing defaults, and accept extra trailing elements, each reported as
//!   drift (`EngineCoreRequest[22]`);
//! - named tuples (`LogprobsLists`) reject extra elements;
//! - a tagged positional struct (TokenSpeed) checks its tag, element 0,
//!   first (another string is `enum`), and numbers its drift by wire
//!   position, the tag counting as 0 (docs/tokenspeed-wire.md §3);
//! - map structs fill absent keys with defaults, reject absent required keys,
//!   and accept unknown keys, each reported as drift
//!   (`EngineCoreRequest.sampling_params.future_knob`);
//! - a `float` field accepts float64, float32 (widened exactly) and integers
//!   (kept as integers so that re-encoding is byte-exact); `int` rejects
//!   floats and bools; `bool` rejects 0/1; `str` rejects `bin` and invalid
//!   UTF-8;
//! - the validations vLLM's `__post_init__` runs on decode are applied
//!   (`crate::validate`);
//! - arrays that vLLM's decode hooks unpack (`UtilityResult`'s
//!   `[type_info, value]`, a tensor's `[dtype, shape, data]`) are
//!   `missing-field` when short and `type` when long, like positional
//!   structs (docs/case-format.md §5.2);
//! - tensors are `[dtype, shape, data]`, their data inline or in an aux
//!   frame, their shape checked against the buffer (`tensor`).
//!
//! # Limits
//!
//! Every limit, its default and why: docs/limits.md. In short: every
//! declared array, map, string and binary length is checked against the
//! bytes that remain before anything is allocated (each element takes at
//! least one byte); frame counts and sizes are bounded; the tensor bytes
//! copied are bounded by the size of all frames; nesting is bounded by
//! [`Limits::max_depth`], 995 by default: measured, it is exactly the
//! deepest message vLLM's engine decodes. msgspec counts each nesting level
//! (array, map, struct) against CPython's recursion limit (1000 by default,
//! CPython 3.11 as in both vLLM releases' environments), after the Python
//! frames already on the decoding thread; the engine's input thread has 5
//! (`Thread._bootstrap`, `_bootstrap_inner`, `run`, `process_input_sockets`,
//! `MsgpackDecoder.decode`), so it decodes 995 levels counted from the
//! message root and raises `RecursionError` at the 996th (goldens
//! `request/extra_args_at_engine_depth`, `request/extra_args_past_engine_depth`,
//! `utility/args_*_engine_depth`). This decoder counts levels the same way
//! (the root struct is level 1, each struct, array, map and tensor below it
//! one more) and refuses the 996th with `limits`.
//!
//! The depth does not cost call stack: the only unbounded nesting is in
//! `Any`-typed values and multimodal `NestedTensors`, decoded iteratively
//! (`any`); the typed recursion follows the schema, whose deepest path is
//! a handful of levels. A debug build decodes a message at the default
//! limit in under 64 KiB of stack (and one 50 000 levels deep, with a
//! raised limit, in the same), so no input can exhaust the stack. Memory
//! stays a small multiple of the input size: each level costs one
//! open-container record and the value itself.
//!
//! Where the parts are: this module holds the entry points, the limits and
//! the typed dispatch (`Decoder::value`); `structs` the struct layouts,
//! `tensor` the tensors and their shape rules, `any` the iterative
//! `Any`/`NestedTensors` decoding.

use crate::error::{Error, RejectClass};
use crate::msgpack::{ReadError, Reader, Token};
use crate::schema::{Layout, Ty};
use crate::value::Value;

mod any;
mod structs;
mod tensor;
pub use tensor::{check_tensor_shape, resolve_shape};

/// The nesting vLLM's engine admits on its input socket, counted from the
/// message root as this decoder counts it (every array, map, struct and
/// tensor one level): 995. See the module docs ("Limits") for how it was
/// measured.
pub const VLLM_ENGINE_MAX_DEPTH: usize = 995;

/// Python frames on the stack of vLLM's engine input thread when it calls
/// msgspec (`Thread._bootstrap`, `_bootstrap_inner`, `run`,
/// `EngineCoreProc.process_input_sockets`, `MsgpackDecoder.decode`).
const ENGINE_INPUT_THREAD_FRAMES: usize = 5;

/// Decoder limits. The defaults suit an EngineCore gateway; every field can
/// be set (`Limits { max_depth: 1995, ..Limits::default() }`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Maximum nesting of arrays, maps, structs and tensors, counted from
    /// the message root (the root struct is level 1). Default
    /// [`VLLM_ENGINE_MAX_DEPTH`] (995): exactly what vLLM's engine decodes
    /// under CPython's default recursion limit, so the decoder admits
    /// every message the engine admits and refuses, with `limits`, the
    /// messages the engine refuses with a `RecursionError`. An engine whose
    /// interpreter runs with a higher recursion limit admits more
    /// ([`Limits::for_recursion_limit`]).
    pub max_depth: usize,
    /// Maximum number of frames in one message (payload and aux frames).
    /// Default 4096.
    pub max_frames: usize,
    /// Maximum size of one frame. Default 1 GiB (vLLM's own socket buffers
    /// go to 512 MiB; a larger frame is not something an engine sends).
    pub max_frame_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_depth: VLLM_ENGINE_MAX_DEPTH, max_frames: 4096, max_frame_bytes: 1 << 30 }
    }
}

impl Limits {
    /// The default limits with the depth an engine admits whose Python
    /// interpreter runs with `sys.getrecursionlimit() == recursion_limit`
    /// (CPython 3.11: msgspec counts each nesting level against the limit,
    /// after the input thread's own frames). For example 2000, the limit
    /// torch's inductor raises the interpreter to when it compiles a graph
    /// in the engine process, gives 1995.
    pub fn for_recursion_limit(recursion_limit: usize) -> Self {
        Limits { max_depth: recursion_limit.saturating_sub(ENGINE_INPUT_THREAD_FRAMES), ..Limits::default() }
    }
}

/// A decoded message: its value and the drift seen (extra trailing elements
/// and unknown keys, by path), in wire order.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The message as a value of the release's schema.
    pub value: Value,
    /// Paths of extra trailing elements and unknown keys, in wire order.
    pub drift: Vec<String>,
}

/// Decodes one payload against `ty`. `frames` are the buffers aux indices
/// refer to (`frames[0]` is the payload itself). `root` names the message in
/// paths.
pub fn decode_payload(
    root: &'static str,
    ty: &'static Ty,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Decoded, Error> {
    crate::frames::with_frame_refs(frames, |frames| decode_payload_in(root, ty, frames, limits, false))
}

/// [`decode_payload`] with TokenSpeed's tensor rules when `tokenspeed`
/// (docs/tokenspeed-wire.md §6): a torch-typed field also takes numpy dtype
/// spellings (`<f4`; the engine's hook reads them through numpy before
/// viewing the buffer as a torch tensor), and a negative aux-frame index
/// counts from the last frame, as the engine's Python list indexing does.
pub(crate) fn decode_payload_in(
    root: &'static str,
    ty: &'static Ty,
    frames: &[&[u8]],
    limits: &Limits,
    tokenspeed: bool,
) -> Result<Decoded, Error> {
    let Some(&payload) = frames.first() else {
        return Err(Error::new(RejectClass::Frames, root, "no payload frame"));
    };
    if frames.len() > limits.max_frames {
        return Err(Error::new(
            RejectClass::Limits,
            root,
            format!("{} frames exceed the limit of {}", frames.len(), limits.max_frames),
        ));
    }
    if let Some(big) = frames.iter().position(|f| f.len() > limits.max_frame_bytes) {
        return Err(Error::new(
            RejectClass::Limits,
            root,
            format!("frame {big} is {} bytes, over the limit of {}", frames[big].len(), limits.max_frame_bytes),
        ));
    }
    let input_bytes: usize = frames.iter().map(|f| f.len()).sum();
    let mut d = Decoder::new(payload, frames, limits, 0, input_bytes, tokenspeed);
    let value = d.value(ty).map_err(|e| (*e).under(root))?;
    if !d.r.is_empty() {
        let at = d.r.position();
        return Err(Error::new(
            RejectClass::Malformed,
            root,
            format!("trailing bytes after the message (byte {at} of {})", payload.len()),
        ));
    }
    let mut drift = d.drift;
    for p in &mut drift {
        p.insert_str(0, root);
    }
    Ok(Decoded { value, drift })
}

/// One value decoded as [`decode_payload`] decodes it inside a message:
/// for `crate::hot`, which reads the common fields of an output batch itself
/// and hands the rare ones (and the lazily decoded whole outputs) here.
pub(crate) struct SubValue {
    pub value: Value,
    /// The payload position after the value.
    pub end: usize,
    /// Tensor bytes that may still be referenced after it.
    pub tensor_budget: usize,
    /// Whether it reported drift (the caller then takes the message's drift
    /// from [`decode_payload`]).
    pub drift: bool,
}

/// Decodes one value of `ty` starting at byte `start` of the payload
/// (`frames[0]`), at nesting `depth` (the levels already open above it,
/// counted as [`decode_payload`] counts them) with `tensor_budget` tensor
/// bytes left. Errors carry paths relative to the value.
pub(crate) fn decode_sub(
    ty: &'static Ty,
    frames: &[&[u8]],
    start: usize,
    depth: usize,
    tensor_budget: usize,
    limits: &Limits,
) -> Result<SubValue, Error> {
    let payload = frames.first().and_then(|p| p.get(start..)).unwrap_or_default();
    let mut d = Decoder::new(payload, frames, limits, depth, tensor_budget, false);
    let value = d.value(ty).map_err(|e| *e)?;
    Ok(SubValue { value, end: start + d.r.position(), tensor_budget: d.tensor_budget, drift: !d.drift.is_empty() })
}

/// Internal result: errors boxed so results stay small on the hot path;
/// paths are built while unwinding (nothing is spent on them on success).
type R<T> = Result<T, Box<Error>>;

struct Decoder<'a, 'l> {
    r: Reader<'a>,
    frames: &'a [&'a [u8]],
    /// Drift paths, relative to the innermost level being decoded until
    /// that level returns and prefixes its segment.
    drift: Vec<String>,
    depth: usize,
    limits: &'l Limits,
    /// Struct entries being decoded, as a stack shared by nested structs
    /// (each struct takes its tail when done): one exact allocation per
    /// struct instead of a growing vector each.
    scratch: Vec<(u16, Value)>,
    /// Elements that may still be preallocated for declared lengths, over
    /// the whole message. Starts at the payload size: every element takes
    /// at least one byte, so a well-formed message never runs out, while
    /// nested headers that each declare "everything that remains" cannot
    /// preallocate more than once over (beyond it, vectors grow as they
    /// fill).
    prealloc_budget: usize,
    /// Tensor bytes that may still be copied: the size of all frames. An
    /// engine references each aux frame once; a message that references the
    /// same buffer again and again would otherwise copy it each time.
    tensor_budget: usize,
    /// TokenSpeed's tensor rules (see [`decode_payload_in`]).
    tokenspeed: bool,
}

impl<'a, 'l> Decoder<'a, 'l> {
    /// A decoder of `payload` (the message's, or the part of it a value
    /// starts at) with `depth` levels already open above it and
    /// `tensor_budget` tensor bytes left.
    fn new(
        payload: &'a [u8],
        frames: &'a [&'a [u8]],
        limits: &'l Limits,
        depth: usize,
        tensor_budget: usize,
        tokenspeed: bool,
    ) -> Self {
        Decoder {
            r: Reader::new(payload),
            frames,
            drift: Vec::new(),
            depth,
            limits,
            scratch: Vec::new(),
            prealloc_budget: payload.len(),
            tensor_budget,
            tokenspeed,
        }
    }
}

/// One step of a path.
#[derive(Clone, Copy)]
enum Seg<'k> {
    Field(&'static str),
    Index(usize),
    Key(&'k str),
}

impl Seg<'_> {
    fn render(self) -> String {
        match self {
            Seg::Field(n) | Seg::Key(n) => format!(".{n}"),
            Seg::Index(i) => format!("[{i}]"),
        }
    }
}

fn kind_name(ty: &Ty) -> String {
    match ty {
        Ty::Any => "any".into(),
        Ty::Bool => "bool".into(),
        Ty::Int | Ty::IntEnum(_) => "int".into(),
        Ty::Float => "float".into(),
        Ty::Str | Ty::StrLiteral(_) => "str".into(),
        Ty::Bytes => "bytes".into(),
        Ty::Optional(t) => format!("{} | null", kind_name(t)),
        Ty::List(_) | Ty::Set(_) | Ty::Tensor(_) | Ty::UtilityResult => "array".into(),
        Ty::NestedTensors => "array | int | float".into(),
        Ty::Dict(..) => "object".into(),
        Ty::Union(ms) => ms.iter().map(kind_name).collect::<Vec<_>>().join(" | "),
        Ty::Struct(s) => match s.layout {
            Layout::Positional | Layout::NamedTuple | Layout::Tuple => "array".into(),
            _ => "object".into(),
        },
    }
}

/// Whether a token of this kind can start a value of `ty` (for unions).
fn token_fits(ty: &Ty, t: &Token) -> bool {
    match (ty, t) {
        (Ty::Any, _) => true,
        (Ty::Bool, Token::Bool(_)) => true,
        (Ty::Int | Ty::IntEnum(_), Token::Int(_) | Token::UInt(_)) => true,
        (Ty::Float, Token::F32(_) | Token::F64(_)) => true,
        (Ty::Str | Ty::StrLiteral(_), Token::Str(_)) => true,
        (Ty::Bytes, Token::Bin(_)) => true,
        (Ty::Optional(inner), t) => matches!(t, Token::Nil) || token_fits(inner, t),
        (Ty::List(_) | Ty::Set(_) | Ty::Tensor(_) | Ty::UtilityResult, Token::Array(_)) => true,
        (Ty::NestedTensors, Token::Array(_) | Token::Int(_) | Token::UInt(_) | Token::F32(_) | Token::F64(_)) => true,
        (Ty::Dict(..), Token::Map(_)) => true,
        (Ty::Union(ms), t) => ms.iter().any(|m| token_fits(m, t)),
        (Ty::Struct(s), Token::Array(_)) => matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple),
        (Ty::Struct(s), Token::Map(_)) => !matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple),
        _ => false,
    }
}

trait Under {
    fn under(self, prefix: &str) -> Self;
}

impl Under for Box<Error> {
    fn under(mut self, prefix: &str) -> Self {
        self.path.insert_str(0, prefix);
        self
    }
}

fn err(class: RejectClass, detail: impl Into<String>) -> Box<Error> {
    Box::new(Error::new(class, String::new(), detail))
}

fn type_err(want: &Ty, got: &Token) -> Box<Error> {
    err(RejectClass::Type, format!("expected {}, got {}", kind_name(want), got.type_name()))
}

fn read_err(e: ReadError) -> Box<Error> {
    match e {
        ReadError::Truncated => err(RejectClass::Malformed, "input truncated"),
        ReadError::ReservedMarker => err(RejectClass::Malformed, "reserved byte 0xc1 is not MessagePack"),
    }
}

#[inline]
fn utf8(b: &[u8]) -> R<String> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8. (Request ids and most keys are
        // short ASCII strings, for which the general check costs more than
        // the copy.)
        return Ok(unsafe { String::from_utf8_unchecked(b.to_vec()) });
    }
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(err(RejectClass::Malformed, "invalid UTF-8 in str")),
    }
}

impl<'a> Decoder<'a, '_> {
    /// Runs `f` one level down at `seg`: prefixes `seg` to the path of an
    /// error it returns and of the drift it records.
    #[inline]
    fn at<T>(&mut self, seg: Seg<'_>, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let mark = self.drift.len();
        let r = f(self);
        if self.drift.len() > mark {
            let s = seg.render();
            for d in &mut self.drift[mark..] {
                d.insert_str(0, &s);
            }
        }
        r.map_err(|mut e| {
            e.path.insert_str(0, &seg.render());
            e
        })
    }

    #[inline]
    fn token(&mut self) -> R<Token<'a>> {
        self.r.token().map_err(read_err)
    }

    fn peek(&self) -> R<Token<'a>> {
        self.r.clone().token().map_err(read_err)
    }

    /// Checks a declared element count against the remaining input.
    #[inline]
    fn check_len(&self, n: u32, bytes_per_element: usize) -> R<usize> {
        let n = n as usize;
        if n.saturating_mul(bytes_per_element) > self.r.remaining() {
            return Err(err(
                RejectClass::Malformed,
                format!("declared length {n} exceeds the {} bytes that remain", self.r.remaining()),
            ));
        }
        Ok(n)
    }

    /// How many of `n` declared elements to preallocate (see
    /// `prealloc_budget`).
    #[inline]
    fn prealloc(&mut self, n: usize) -> usize {
        let c = n.min(self.prealloc_budget);
        self.prealloc_budget -= c;
        c
    }

    #[inline]
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(err(RejectClass::Limits, format!("nesting deeper than {} levels", self.limits.max_depth)));
        }
        Ok(())
    }

    fn value(&mut self, ty: &'static Ty) -> R<Value> {
        match ty {
            Ty::Any => self.any(),
            Ty::Bool => match self.token()? {
                Token::Bool(b) => Ok(Value::Bool(b)),
                t => Err(type_err(ty, &t)),
            },
            Ty::Int => match self.token()? {
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(type_err(ty, &t)),
            },
            Ty::IntEnum(e) => match self.token()? {
                Token::Int(v) if e.contains(v) => Ok(Value::Int(v)),
                Token::Int(v) => Err(err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                Token::UInt(v) => Err(err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                t => Err(type_err(ty, &t)),
            },
            Ty::Float => match self.token()? {
                Token::F64(v) => Ok(Value::Float(v)),
                Token::F32(v) => Ok(Value::Float(v as f64)),
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(type_err(ty, &t)),
            },
            Ty::Str => match self.token()? {
                Token::Str(b) => Ok(Value::Str(utf8(b)?)),
                t => Err(type_err(ty, &t)),
            },
            Ty::StrLiteral(allowed) => match self.token()? {
                Token::Str(b) => {
                    let s = utf8(b)?;
                    if allowed.contains(&s.as_str()) {
                        Ok(Value::Str(s))
                    } else {
                        Err(err(
                            RejectClass::Enum,
                            format!("invalid enum value {s:?} (allowed: {})", allowed.join(", ")),
                        ))
                    }
                }
                t => Err(type_err(ty, &t)),
            },
            Ty::Bytes => match self.token()? {
                Token::Bin(b) => Ok(Value::Bytes(b.to_vec())),
                t => Err(type_err(ty, &t)),
            },
            Ty::Optional(inner) => {
                if self.r.peek_byte() == Some(0xc0) {
                    self.token()?;
                    Ok(Value::Nil)
                } else {
                    self.value(inner)
                }
            }
            Ty::List(inner) | Ty::Set(inner) => {
                let t = self.token()?;
                let Token::Array(n) = t else { return Err(type_err(ty, &t)) };
                let n = self.check_len(n, 1)?;
                self.enter()?;
                let mut v = if matches!(inner, Ty::Int) { self.int_array(n)? } else { self.list(inner, n)? };
                self.depth -= 1;
                if matches!(ty, Ty::Set(_)) {
                    dedup_set(&mut v);
                }
                Ok(v)
            }
            Ty::Dict(k, v) => {
                let t = self.token()?;
                let Token::Map(n) = t else { return Err(type_err(ty, &t)) };
                let n = self.check_len(n, 2)?;
                self.enter()?;
                let mut entries = Vec::with_capacity(self.prealloc(n));
                for _ in 0..n {
                    let key = self.value(k)?;
                    let label = match &key {
                        Value::Str(s) => s.clone(),
                        Value::Int(i) => i.to_string(),
                        _ => "?".into(),
                    };
                    let val = self.at(Seg::Key(&label), |d| d.value(v))?;
                    entries.push((key, val));
                }
                self.depth -= 1;
                Ok(Value::Map(entries))
            }
            Ty::Union(members) => {
                let t = self.peek()?;
                match members.iter().find(|m| token_fits(m, &t)) {
                    Some(m) => self.value(m),
                    None => Err(type_err(ty, &t)),
                }
            }
            Ty::Struct(s) => Ok(Value::Struct(self.struct_value(s)?)),
            Ty::Tensor(kind) => Ok(Value::Tensor(Box::new(self.tensor(*kind)?))),
            Ty::NestedTensors => self.nested_tensors(),
            Ty::UtilityResult => match self.token()? {
                Token::Array(2) => {
                    self.enter()?;
                    let ti = self.at(Seg::Index(0), |d| d.any())?;
                    if ti != Value::Nil {
                        // Custom result types travel pickled; vLLM only
                        // accepts them with VLLM_ALLOW_INSECURE_SERIALIZATION.
                        return Err(err(
                            RejectClass::Validation,
                            "a non-nil type_info needs VLLM_ALLOW_INSECURE_SERIALIZATION, which gateways never enable",
                        ));
                    }
                    let v = self.at(Seg::Index(1), |d| d.any())?;
                    self.depth -= 1;
                    Ok(Value::Array(vec![ti, v]))
                }
                // vLLM's decode hook unpacks `result_type, result = obj`:
                // too few elements is a missing field, too many a wrong type
                // (docs/case-format.md §5.2).
                Token::Array(n) => Err(err(
                    if n < 2 { RejectClass::MissingField } else { RejectClass::Type },
                    format!("expected UtilityResult [type_info, value], got array of {n}"),
                )),
                t => Err(type_err(ty, &t)),
            },
        }
    }

    fn int_array(&mut self, n: usize) -> R<Value> {
        let mut out = Vec::with_capacity(self.prealloc(n));
        for i in 0..n {
            if let Some(v) = self.r.small_int() {
                out.push(v);
                continue;
            }
            match self.token()? {
                Token::Int(v) => out.push(v),
                Token::UInt(v) => {
                    // Does not fit i64: fall back to a boxed list.
                    let mut vals: Vec<Value> = out.into_iter().map(Value::Int).collect();
                    vals.push(Value::UInt(v));
                    for j in i + 1..n {
                        vals.push(self.at(Seg::Index(j), |d| d.value(&Ty::Int))?);
                    }
                    return Ok(Value::Array(vals));
                }
                t => return Err(type_err(&Ty::Int, &t).under(&Seg::Index(i).render())),
            }
        }
        Ok(Value::IntArray(out))
    }

    fn list(&mut self, inner: &'static Ty, n: usize) -> R<Value> {
        let mut out = Vec::with_capacity(self.prealloc(n));
        for i in 0..n {
            out.push(self.at(Seg::Index(i), |d| d.value(inner))?);
        }
        Ok(Value::Array(out))
    }
}

/// Python set semantics on decode: duplicates collapse (first occurrence
/// kept, wire order otherwise preserved).
fn dedup_set(v: &mut Value) {
    match v {
        Value::IntArray(xs) if xs.len() > 1 => {
            work::add(xs.len() as u64);
            let mut seen = std::collections::HashSet::with_capacity(xs.len());
            xs.retain(|x| seen.insert(*x));
        }
        Value::Array(xs) if xs.len() > 1 && xs.iter().all(|x| matches!(x, Value::Str(_))) => {
            // set[str]: hashed, linear in the element count.
            work::add(xs.len() as u64);
            let keep: Vec<bool> = {
                let mut seen = std::collections::HashSet::with_capacity(xs.len());
                xs.iter().map(|x| if let Value::Str(s) = x { seen.insert(s.as_str()) } else { true }).collect()
            };
            let mut keep = keep.into_iter();
            xs.retain(|_| keep.next().unwrap_or(true));
        }
        Value::Array(xs) if xs.len() > 1 => {
            let mut kept: Vec<Value> = Vec::with_capacity(xs.len());
            for x in xs.drain(..) {
                work::add(kept.len() as u64 + 1);
                if !kept.contains(&x) {
                    kept.push(x);
                }
            }
            *xs = kept;
        }
        _ => {}
    }
}

/// A per-thread count of the decoder's element comparisons in set
/// deduplication, for tests that bound the work a decode does (a count is
/// stable where a wall-clock bound is not). Not part of the API.
pub mod work {
    use std::cell::Cell;

    thread_local! {
        static STEPS: Cell<u64> = const { Cell::new(0) };
    }

    #[inline]
    pub(crate) fn add(n: u64) {
        STEPS.with(|s| s.set(s.get().saturating_add(n)));
    }

    /// The steps counted on this thread since the last [`reset`].
    pub fn steps() -> u64 {
        STEPS.with(Cell::get)
    }

    /// Sets this thread's count to zero.
    pub fn reset() {
        STEPS.with(|s| s.set(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::vllm::{LATE_INTERACTION_PARAMS, SAMPLING_PARAMS};

    fn decoder<'a>(payload: &'a [u8], frames: &'a [&'a [u8]], limits: &'a Limits) -> Decoder<'a, 'a> {
        Decoder::new(payload, frames, limits, 0, payload.len(), false)
    }

    static POSITIONAL: Ty = Ty::Struct(&LATE_INTERACTION_PARAMS);
    static MAP: Ty = Ty::Struct(&SAMPLING_PARAMS);

    #[test]
    fn a_struct_is_named_by_its_wire_form_in_type_errors() {
        assert_eq!(kind_name(&POSITIONAL), "array");
        assert_eq!(kind_name(&MAP), "object");
    }

    #[test]
    fn a_union_member_takes_exactly_the_tokens_of_its_kind() {
        let fits = |ty: &Ty, t: Token| token_fits(ty, &t);
        assert!(fits(&Ty::Bool, Token::Bool(true)) && !fits(&Ty::Bool, Token::Int(1)));
        assert!(fits(&Ty::Float, Token::F64(0.5)) && fits(&Ty::Float, Token::F32(0.5)));
        assert!(!fits(&Ty::Float, Token::Str(b"0.5")));
        assert!(fits(&Ty::Bytes, Token::Bin(b"x")) && !fits(&Ty::Bytes, Token::Str(b"x")));
        static OPT_INT: Ty = Ty::Optional(&Ty::Int);
        assert!(fits(&OPT_INT, Token::Nil) && fits(&OPT_INT, Token::Int(3)));
        assert!(!fits(&OPT_INT, Token::Str(b"3")));
        assert!(fits(&POSITIONAL, Token::Array(2)) && !fits(&POSITIONAL, Token::Map(2)));
        assert!(fits(&MAP, Token::Map(2)) && !fits(&MAP, Token::Array(2)));
    }

    #[test]
    fn preallocation_is_bounded_by_the_payload_over_the_whole_message() {
        let payload = [0u8; 10];
        let limits = Limits::default();
        let mut d = decoder(&payload, &[], &limits);
        assert_eq!(d.prealloc(4), 4);
        assert_eq!(d.prealloc(10), 6, "what is left of the ten");
        assert_eq!(d.prealloc(3), 0);
    }

    #[test]
    fn a_utility_result_gives_its_level_back_when_decoded() {
        // [nil, 1]: vLLM's `[type_info, value]`.
        let payload = [0x92, 0xc0, 0x01];
        let limits = Limits::default();
        let mut d = decoder(&payload, &[], &limits);
        let v = d.value(&Ty::UtilityResult).unwrap();
        assert_eq!(v, Value::Array(vec![Value::Nil, Value::Int(1)]));
        assert_eq!(d.depth, 0);
    }

    fn deduplicated(mut v: Value) -> (Value, u64) {
        work::reset();
        dedup_set(&mut v);
        (v, work::steps())
    }

    fn strs(xs: &[&str]) -> Value {
        Value::Array(xs.iter().map(|s| Value::Str((*s).into())).collect())
    }

    #[test]
    fn a_set_keeps_the_first_of_each_element_in_wire_order_with_linear_work_for_strings_and_ints() {
        // set[str] and set[int] are hashed: one step an element.
        assert_eq!(deduplicated(strs(&["b", "a", "b", "c", "a"])), (strs(&["b", "a", "c"]), 5));
        assert_eq!(deduplicated(Value::IntArray(vec![3, 1, 3, 2])), (Value::IntArray(vec![3, 1, 2]), 4));
        // Anything else is compared with what was kept: 1 + 2 + 3 steps.
        let mixed = Value::Array(vec![Value::Int(1), Value::Str("a".into()), Value::Int(1)]);
        assert_eq!(deduplicated(mixed), (Value::Array(vec![Value::Int(1), Value::Str("a".into())]), 6));
        // One element or none: nothing to do.
        assert_eq!(deduplicated(strs(&["a"])), (strs(&["a"]), 0));
        assert_eq!(deduplicated(Value::Array(vec![Value::Int(1)])), (Value::Array(vec![Value::Int(1)]), 0));
        assert_eq!(deduplicated(Value::IntArray(vec![7])), (Value::IntArray(vec![7]), 0));
    }

    #[test]
    fn work_counts_add_up_until_reset() {
        work::reset();
        work::add(2);
        work::add(3);
        assert_eq!(work::steps(), 5);
        work::reset();
        assert_eq!(work::steps(), 0);
    }
}
