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
//! - tensors are `[dtype, shape, data]`, data an ext-3 body, a `bin`, or the
//!   index of a frame (index 0 is the payload frame itself, as in vLLM; a
//!   negative index, which vLLM's Python list would count from the end, is
//!   refused as `frames`); the shape is
//!   resolved against the buffer as numpy's `reshape` and torch's `view` do,
//!   one dimension being inferred ([`check_tensor_shape`]), and the value
//!   keeps the shape as sent.
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
//! `Any`-typed values (`extra_args`, `kv_transfer_params`, UTILITY
//! arguments, ...) and multimodal `NestedTensors`, and both are decoded
//! iteratively, with an explicit stack on the heap; the typed recursion
//! follows the schema, whose deepest path is a handful of levels. A debug
//! build decodes a message at the default limit in under 64 KiB of stack
//! (and one 50 000 levels deep, with a raised limit, in the same), so no
//! input can exhaust the stack. Memory stays a small multiple of the input
//! size: each level costs one open-container record and the value itself.
#![warn(missing_docs)]

use crate::error::{Error, RejectClass};
use crate::msgpack::{ReadError, Reader, Token};
use crate::schema::Default as FieldDefault;
use crate::schema::{Layout, StructSchema, TensorKind, Ty};
use crate::value::{is_default, numpy_dtype, torch_dtype, DType, StructValue, Tensor, Value};

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
    let mut d = Decoder {
        r: Reader::new(payload),
        frames,
        drift: Vec::new(),
        depth: 0,
        limits,
        scratch: Vec::new(),
        prealloc_budget: payload.len(),
        tensor_budget: input_bytes,
        tokenspeed,
    };
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
    let mut d = Decoder {
        r: Reader::new(payload),
        frames,
        drift: Vec::new(),
        depth,
        limits,
        scratch: Vec::new(),
        prealloc_budget: payload.len(),
        tensor_budget,
        tokenspeed: false,
    };
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

/// An open container of an `Any` value (see `Decoder::any`).
enum AnyFrame {
    Array {
        items: Vec<Value>,
        left: usize,
    },
    /// `key` holds the key whose value comes next.
    Map {
        entries: Vec<(Value, Value)>,
        key: Option<Value>,
        left: usize,
    },
}

/// The path inside an `Any` value to the element being read.
fn any_path(open: &[AnyFrame]) -> String {
    let mut p = String::new();
    for f in open {
        match f {
            AnyFrame::Array { items, .. } => p.push_str(&Seg::Index(items.len()).render()),
            AnyFrame::Map { key: Some(k), .. } => {
                let label = match k {
                    Value::Str(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                p.push_str(&Seg::Key(&label).render());
            }
            AnyFrame::Map { key: None, .. } => {}
        }
    }
    p
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

    /// vLLM's rule (`_decode_nested_tensors`): numbers stay numbers; a
    /// non-empty array whose first element is a string is a torch tensor;
    /// any other array is a list of nested tensors. Iterative (an explicit
    /// stack of open lists), so the nesting costs heap, not call stack.
    fn nested_tensors(&mut self) -> R<Value> {
        let mut open: Vec<(Vec<Value>, usize)> = Vec::new();
        let path =
            |open: &[(Vec<Value>, usize)]| open.iter().map(|(xs, _)| Seg::Index(xs.len()).render()).collect::<String>();
        loop {
            let t = self.peek().map_err(|e| e.under(&path(&open)))?;
            let mut v = match t {
                Token::Int(_) | Token::UInt(_) | Token::F32(_) | Token::F64(_) | Token::Bool(_) => {
                    self.any().map_err(|e| e.under(&path(&open)))?
                }
                Token::Array(n) => {
                    let mut look = self.r.clone();
                    let _ = look.token();
                    if n > 0 && matches!(look.token(), Ok(Token::Str(_))) {
                        let t = self.tensor(TensorKind::Torch).map_err(|e| e.under(&path(&open)))?;
                        Value::Tensor(Box::new(t))
                    } else {
                        self.token()?;
                        let n = self.check_len(n, 1).and_then(|n| self.enter().map(|()| n));
                        let n = n.map_err(|e| e.under(&path(&open)))?;
                        if n > 0 {
                            open.push((Vec::with_capacity(self.prealloc(n)), n));
                            continue;
                        }
                        self.depth -= 1;
                        Value::Array(Vec::new())
                    }
                }
                t => return Err(type_err(&Ty::NestedTensors, &t).under(&path(&open))),
            };
            // Hand the value to the innermost open list, closing the lists
            // it completes.
            loop {
                let Some((items, left)) = open.last_mut() else { return Ok(v) };
                items.push(v);
                *left -= 1;
                if *left > 0 {
                    break;
                }
                let (items, _) = open.pop().unwrap_or_default();
                self.depth -= 1;
                v = Value::Array(items);
            }
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

    /// An `Any`-typed value: the plain MessagePack tree. Iterative (an
    /// explicit stack of open arrays and maps), so that the nesting the
    /// depth limit admits costs heap, not call stack; errors name the path
    /// as the recursive rendering would (`[i]` per array element, `.key`
    /// per map value, nothing for a map key).
    fn any(&mut self) -> R<Value> {
        let mut open: Vec<AnyFrame> = Vec::new();
        loop {
            let mut v = match self.any_scalar_or_open(&mut open) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => return Err(e.under(&any_path(&open))),
            };
            // Hand the value to the innermost open container, closing the
            // containers it completes.
            loop {
                match open.last_mut() {
                    None => return Ok(v),
                    Some(AnyFrame::Array { items, left }) => {
                        items.push(v);
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        let Some(AnyFrame::Array { items, .. }) = open.pop() else { unreachable!() };
                        v = Value::Array(items);
                    }
                    Some(AnyFrame::Map { entries, key, left }) => match key.take() {
                        None => {
                            *key = Some(v);
                            break;
                        }
                        Some(k) => {
                            entries.push((k, v));
                            *left -= 1;
                            if *left > 0 {
                                break;
                            }
                            let Some(AnyFrame::Map { entries, .. }) = open.pop() else { unreachable!() };
                            v = Value::Map(entries);
                        }
                    },
                }
                self.depth -= 1;
            }
        }
    }

    /// One step of [`Decoder::any`]: a scalar (or an empty container) as
    /// `Some`, or `None` after opening a non-empty container on `open`.
    fn any_scalar_or_open(&mut self, open: &mut Vec<AnyFrame>) -> R<Option<Value>> {
        Ok(Some(match self.token()? {
            Token::Nil => Value::Nil,
            Token::Bool(b) => Value::Bool(b),
            Token::Int(v) => Value::Int(v),
            Token::UInt(v) => Value::UInt(v),
            Token::F32(v) => Value::Float(v as f64),
            Token::F64(v) => Value::Float(v),
            Token::Str(b) => Value::Str(utf8(b)?),
            Token::Bin(b) => Value::Bytes(b.to_vec()),
            Token::Ext(t, b) => ext(t, b)?,
            Token::Array(n) => {
                let n = self.check_len(n, 1)?;
                self.enter()?;
                if n > 0 {
                    open.push(AnyFrame::Array { items: Vec::with_capacity(self.prealloc(n)), left: n });
                    return Ok(None);
                }
                self.depth -= 1;
                Value::Array(Vec::new())
            }
            Token::Map(n) => {
                let n = self.check_len(n, 2)?;
                self.enter()?;
                if n > 0 {
                    open.push(AnyFrame::Map { entries: Vec::with_capacity(self.prealloc(n)), key: None, left: n });
                    return Ok(None);
                }
                self.depth -= 1;
                Value::Map(Vec::new())
            }
        }))
    }

    fn struct_value(&mut self, s: &'static StructSchema) -> R<StructValue> {
        let t = self.token()?;
        self.enter()?;
        let v = match (s.layout, t) {
            (Layout::Positional | Layout::NamedTuple | Layout::Tuple, Token::Array(n)) => self.positional(s, n)?,
            (Layout::SparseMap | Layout::FullMap, Token::Map(n)) => self.keyed(s, n)?,
            (Layout::OpenMap, Token::Map(n)) => self.open_map(s, n)?,
            (_, t) => {
                let want = if matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple) {
                    "array"
                } else {
                    "object"
                };
                return Err(err(RejectClass::Type, format!("expected {want} ({}), got {}", s.name, t.type_name())));
            }
        };
        self.depth -= 1;
        if s.validate.is_some() {
            if let Err(violation) = crate::validate::check(s, &v) {
                let path = if violation.fields.is_empty() { String::new() } else { format!(".{}", violation.path()) };
                return Err(Box::new(Error::new(RejectClass::Validation, path, violation.message)));
            }
        }
        Ok(v)
    }

    fn positional(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 1)?;
        if let Some(tag) = s.tag() {
            return self.tagged(s, tag, n);
        }
        self.positional_fields(s, n, 0)
    }

    /// A tagged positional struct (TokenSpeed): element 0 must be the tag
    /// string (another string is `enum`, another kind `type`), the fields
    /// follow; drift is numbered by wire position, the tag counting as 0
    /// (docs/tokenspeed-wire.md §3).
    fn tagged(&mut self, s: &'static StructSchema, tag: &'static str, n: usize) -> R<StructValue> {
        if n == 0 {
            let min = s.min_len() + 1;
            return Err(err(
                RejectClass::MissingField,
                format!("expected array of at least length {min} ({}, tag first), got 0", s.name),
            ));
        }
        self.at(Seg::Index(0), |d| match d.token()? {
            Token::Str(b) if b == tag.as_bytes() => Ok(()),
            Token::Str(b) => {
                Err(err(RejectClass::Enum, format!("invalid tag {:?} (expected {tag:?})", String::from_utf8_lossy(b))))
            }
            t => Err(type_err(&Ty::Str, &t)),
        })?;
        self.positional_fields(s, n - 1, 1)
    }

    /// The `n` field elements of a positional struct; `offset` elements
    /// (a tag) precede them on the wire.
    fn positional_fields(&mut self, s: &'static StructSchema, n: usize, offset: usize) -> R<StructValue> {
        let nf = s.fields.len();
        if n < nf && n < s.min_len() {
            let required = s.min_len() + offset;
            let got = n + offset;
            return Err(err(
                RejectClass::MissingField,
                format!("expected array of at least length {required} ({}), got {got}", s.name),
            ));
        }
        if matches!(s.layout, Layout::NamedTuple | Layout::Tuple) && n > nf {
            return Err(err(RejectClass::Type, format!("expected array of at most length {nf} ({}), got {n}", s.name)));
        }
        let base = self.scratch.len();
        for (i, field) in s.fields.iter().enumerate().take(n) {
            // Fast path: most fields of an output are nil, and held only
            // when nil is not their default.
            if matches!(field.ty, Ty::Optional(_)) && self.r.peek_byte() == Some(0xc0) {
                self.r.bump();
                if field.default != FieldDefault::Nil {
                    self.scratch.push((i as u16, Value::Nil));
                }
                continue;
            }
            let v = self.at(Seg::Field(field.name), |d| d.value(field.ty))?;
            if field.default == FieldDefault::Required || !is_default(&v, &field.default) {
                self.scratch.push((i as u16, v));
            }
        }
        for i in nf..n {
            self.r.skip_value().map_err(read_err)?;
            self.drift.push(Seg::Index(i + offset).render());
        }
        let entries = self.scratch.split_off(base).into_boxed_slice();
        Ok(StructValue::from_entries(s, entries))
    }

    fn keyed(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 2)?;
        let base = self.scratch.len();
        let mut sorted = true;
        // Which fields the wire carried (the tables have at most 64 fields
        // per struct; `schema_tables` checks it).
        let mut present: u64 = 0;
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => b,
                t => {
                    return Err(err(RejectClass::Type, format!("expected str key ({}), got {}", s.name, t.type_name())))
                }
            };
            match s.fields.iter().position(|f| f.name.as_bytes() == key) {
                Some(i) => {
                    let field = &s.fields[i];
                    let v = self.at(Seg::Field(field.name), |d| d.value(field.ty))?;
                    if self.scratch.len() > base && self.scratch[self.scratch.len() - 1].0 >= i as u16 {
                        sorted = false;
                    }
                    self.scratch.push((i as u16, v));
                    present |= 1u64 << (i & 63);
                }
                None => {
                    let name = utf8(key)?;
                    self.r.skip_value().map_err(read_err)?;
                    self.drift.push(Seg::Key(&name).render());
                }
            }
        }
        for (i, field) in s.fields.iter().enumerate() {
            if field.default == FieldDefault::Required && present & (1u64 << (i & 63)) == 0 {
                return Err(err(
                    RejectClass::MissingField,
                    format!("object missing required field `{}` ({})", field.name, s.name),
                ));
            }
        }
        let mut entries = self.scratch.split_off(base);
        if !sorted {
            // Keys out of declaration order, or repeated: the last one wins.
            entries.reverse();
            entries.sort_by_key(|(k, _)| *k);
            entries.dedup_by_key(|(k, _)| *k);
        }
        Ok(StructValue::from_entries(s, entries.into_boxed_slice()))
    }

    /// A plain dict with known keys: every entry kept in wire order; known
    /// keys type-checked; required keys must be present.
    fn open_map(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 2)?;
        let mut extra = Vec::with_capacity(self.prealloc(n));
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => utf8(b)?,
                t => return Err(err(RejectClass::Type, format!("expected str key, got {}", t.type_name()))),
            };
            let ty = s.fields.iter().find(|f| f.name == key).map_or(&Ty::Any, |f| f.ty);
            let v = self.at(Seg::Key(&key), |d| d.value(ty))?;
            extra.push((Value::Str(key), v));
        }
        for field in s.fields.iter().filter(|f| f.default == FieldDefault::Required) {
            if !extra.iter().any(|(k, _)| matches!(k, Value::Str(s) if s == field.name)) {
                return Err(err(RejectClass::MissingField, format!("object missing required key `{}`", field.name)));
            }
        }
        Ok(StructValue::new(s, vec![Value::Map(extra)]))
    }

    fn tensor(&mut self, kind: TensorKind) -> R<Tensor> {
        let t = self.token()?;
        let Token::Array(n) = t else {
            return Err(err(RejectClass::Type, format!("expected tensor [dtype, shape, data], got {}", t.type_name())));
        };
        if n != 3 {
            // vLLM's decode hook unpacks three names (`dtype, shape, data =
            // arr`): too few elements is a missing field, too many a wrong
            // type (docs/case-format.md §5.2).
            let class = if n < 3 { RejectClass::MissingField } else { RejectClass::Type };
            return Err(err(class, format!("expected tensor [dtype, shape, data], got array of {n}")));
        }
        self.enter()?;
        if self.tokenspeed {
            return self.tensor_in_read_order(kind);
        }
        // vLLM's hooks (`_decode_ndarray`, `_decode_tensor`) get the three
        // elements as msgspec decoded them, whatever their types, and look
        // at `data` first (an int indexes the frames: `IndexError`), then
        // the dtype (`np.frombuffer(buf, dtype)`, `getattr(torch, dtype)`),
        // the buffer's size, then the shape (`reshape`, `view`): the
        // elements are read as they come and judged in that order
        // (docs/wire-protocol.md §6.5).
        let dtype = self.at(Seg::Index(0), |d| match d.r.peek_byte() {
            Some(0xa0..=0xbf | 0xd9..=0xdb) => match d.token()? {
                Token::Str(b) => Ok(Ok(utf8(b)?)),
                _ => unreachable!("a str marker"),
            },
            _ => d.any().map(|v| Err(v.kind_name())),
        })?;
        let shape = self.at(Seg::Index(1), |d| {
            if !matches!(d.r.peek_byte(), Some(0x90..=0x9f | 0xdc | 0xdd)) {
                return d.any().map(|v| Err(v.kind_name()));
            }
            let Token::Array(dims) = d.token()? else { unreachable!("an array marker") };
            let dims = d.check_len(dims, 1)?;
            let mut shape = Vec::with_capacity(d.prealloc(dims));
            let mut bad = None;
            for i in 0..dims {
                let v = d.at(Seg::Index(i), |d| match d.r.peek_byte() {
                    Some(0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xcf | 0xd0..=0xd3) => match d.token()? {
                        // Negative dimensions are judged with the buffer
                        // below (numpy and torch infer one unknown one).
                        Token::Int(x) => Ok(Some(x)),
                        t => Err(type_err(&Ty::Int, &t)),
                    },
                    _ => d.any().map(|v| {
                        bad.get_or_insert(v.kind_name());
                        None
                    }),
                })?;
                shape.extend(v);
            }
            Ok(match bad {
                None => Ok(shape),
                Some(k) => Err(k),
            })
        })?;
        let frames = self.frames;
        let data = self.at(Seg::Index(2), |d| match d.r.peek_byte() {
            Some(
                0xc0 | 0xa0..=0xbf | 0xd9..=0xdb | 0x90..=0x9f | 0xdc | 0xdd | 0x80..=0x8f | 0xde | 0xdf | 0xca | 0xcb,
            ) => d.any().map(|v| Err(v.kind_name())),
            _ => match d.token()? {
                Token::Ext(3, b) => Ok(Ok(b)),
                Token::Bin(b) => Ok(Ok(b)),
                // A Python bool is an int: `aux_buffers[True]`.
                Token::Bool(b) => match frames.get(usize::from(b)) {
                    Some(f) => Ok(Ok(*f)),
                    None => Err(index_err(i64::from(b), frames.len())),
                },
                Token::Int(i) => {
                    // A negative index is refused: vLLM indexes a Python list,
                    // where -1 is the last frame, but an engine never writes
                    // one, and honouring it would let an appended frame change
                    // what a message means (docs/limits.md).
                    if i < 0 || i as usize >= frames.len() {
                        return Err(index_err(i, frames.len()));
                    }
                    Ok(Ok(frames[i as usize]))
                }
                Token::Ext(t, _) => Err(err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3"))),
                t => Err(err(
                    RejectClass::Type,
                    format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
                )),
            },
        })?;
        let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
        let data = data.map_err(|k| {
            err(RejectClass::Validation, format!("{which} cannot read a buffer from a {k} (tensor data)")).under("[2]")
        })?;
        let dtype = dtype
            .map_err(|k| err(RejectClass::Validation, format!("{which} cannot read a {k} as a dtype")).under("[0]"))?;
        let parsed = match kind {
            TensorKind::Numpy => numpy_dtype(&dtype),
            TensorKind::Torch => torch_dtype(&dtype),
        }
        .ok_or_else(|| err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")).under("[0]"))?;
        let shape = match shape {
            Ok(shape) => shape,
            Err(k) => {
                let size = parsed.elem.size();
                if !data.len().is_multiple_of(size) {
                    return Err(err(
                        RejectClass::Frames,
                        format!("buffer of {} bytes is not a multiple of the item size {size}", data.len()),
                    )
                    .under("[2]"));
                }
                return Err(
                    err(RejectClass::Validation, format!("{which} cannot read a shape holding a {k}")).under("[1]")
                );
            }
        };
        self.tensor_checked(kind, dtype, parsed, shape, data)
    }

    /// TokenSpeed's tensors, judged in the order their elements are read
    /// (its receive path: docs/tokenspeed-wire.md).
    fn tensor_in_read_order(&mut self, kind: TensorKind) -> R<Tensor> {
        let (dtype, parsed) = self.at(Seg::Index(0), |d| {
            let dtype = match d.token()? {
                Token::Str(b) => utf8(b)?,
                t => return Err(type_err(&Ty::Str, &t)),
            };
            let parsed = match kind {
                TensorKind::Numpy => numpy_dtype(&dtype),
                TensorKind::Torch => torch_dtype(&dtype).or_else(|| numpy_dtype(&dtype)),
            };
            match parsed {
                Some(p) => Ok((dtype, p)),
                None => {
                    let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
                    Err(err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")))
                }
            }
        })?;
        let shape = self.at(Seg::Index(1), |d| {
            let t = d.token()?;
            let Token::Array(dims) = t else { return Err(type_err(&Ty::List(&Ty::Int), &t)) };
            let dims = d.check_len(dims, 1)?;
            let mut shape = Vec::with_capacity(d.prealloc(dims));
            for i in 0..dims {
                match d.token()? {
                    Token::Int(x) => shape.push(x),
                    t => return Err(type_err(&Ty::Int, &t).under(&Seg::Index(i).render())),
                }
            }
            Ok(shape)
        })?;
        let frames = self.frames;
        let data: &[u8] = self.at(Seg::Index(2), |d| match d.token()? {
            Token::Ext(3, b) => Ok(b),
            Token::Bin(b) => Ok(b),
            Token::Int(i) if i < 0 && i.unsigned_abs() <= frames.len() as u64 => {
                // TokenSpeed indexes its frame list from the end.
                Ok(frames[frames.len() - i.unsigned_abs() as usize])
            }
            Token::Int(i) => {
                if i < 0 || i as usize >= frames.len() {
                    return Err(index_err(i, frames.len()));
                }
                Ok(frames[i as usize])
            }
            Token::Ext(t, _) => Err(err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3"))),
            t => Err(err(
                RejectClass::Type,
                format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
            )),
        })?;
        self.tensor_checked(kind, dtype, parsed, shape, data)
    }

    /// The checks on a tensor whose elements have their types: the shape
    /// against the buffer, the tensor budget; the tensor.
    fn tensor_checked(
        &mut self,
        kind: TensorKind,
        dtype: String,
        parsed: DType,
        shape: Vec<i64>,
        data: &[u8],
    ) -> R<Tensor> {
        if let Err((class, seg, detail)) = check_tensor_shape(kind, &shape, data.len(), parsed.elem.size()) {
            return Err(err(class, format!("{detail} (dtype {dtype}, shape {shape:?})")).under(seg));
        }
        if data.len() > self.tensor_budget {
            return Err(err(
                RejectClass::Limits,
                format!(
                    "tensor data of {} bytes exceeds what the frames hold ({} bytes left): buffers referenced more than once",
                    data.len(),
                    self.tensor_budget
                ),
            )
            .under("[2]"));
        }
        self.tensor_budget -= data.len();
        self.depth -= 1;
        Ok(Tensor { dtype, shape, data: data.to_vec() })
    }
}

/// An aux-frame index out of the message's frames (vLLM's `IndexError`).
fn index_err(i: i64, frames: usize) -> Box<Error> {
    err(RejectClass::Frames, format!("aux frame index {i} out of range ({frames} frames)"))
}

/// The dimensions `shape` stands for when the buffer holds `elements`
/// items, with numpy's `reshape` rules: at most one negative dimension,
/// which is inferred (numpy takes any negative value as "unknown"; it needs
/// the other dimensions' product to be non-zero and to divide `elements`);
/// otherwise the product must equal `elements`. `None` when the shape does
/// not fit (or its product overflows). Every tensor vLLM accepts, numpy or
/// torch, satisfies this (torch's rules are stricter, see
/// `check_tensor_shape`).
pub fn resolve_shape(shape: &[i64], elements: usize) -> Option<Vec<u64>> {
    let mut unknown = None;
    let mut known: u64 = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            if unknown.replace(i).is_some() {
                return None;
            }
        } else {
            known = known.checked_mul(d as u64)?;
        }
    }
    let elements = elements as u64;
    let mut out: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
    match unknown {
        None => (known == elements).then_some(out),
        Some(i) => {
            if known == 0 || !elements.is_multiple_of(known) {
                return None;
            }
            out[i] = elements / known;
            Some(out)
        }
    }
}

/// vLLM's decode hook on a tensor's shape and buffer (`_decode_ndarray`:
/// `np.frombuffer(buf, dtype).reshape(shape)`; `_decode_tensor`:
/// `torch.frombuffer(buf, uint8).view(dtype).view(shape)`, or for an empty
/// buffer `assert 0 in shape; torch.empty(shape)`), in the order it checks:
///
/// 1. the byte count must be a multiple of the item size (`frames`);
/// 2. the shape must be well-formed: numpy admits one negative dimension of
///    any value, torch exactly one `-1` and no other negative value; an empty
///    torch buffer needs a `0` dimension and no negative one (`validation`:
///    numpy's "can only specify one unknown dimension", torch's "only one
///    dimension can be inferred" / "invalid shape dimension", the failed
///    assertion, "negative dimension");
/// 3. the shape must fit the item count, one unknown dimension being
///    inferred from it ([`resolve_shape`]; `frames`).
///
/// On error: the class, the tensor element the error belongs to (`[1]` the
/// shape, `[2]` the data) and what went wrong.
pub fn check_tensor_shape(
    kind: TensorKind,
    shape: &[i64],
    nbytes: usize,
    itemsize: usize,
) -> Result<(), (RejectClass, &'static str, String)> {
    if !nbytes.is_multiple_of(itemsize) {
        return Err((
            RejectClass::Frames,
            "[2]",
            format!("buffer of {nbytes} bytes is not a multiple of the item size {itemsize}"),
        ));
    }
    let negatives = shape.iter().filter(|&&d| d < 0).count();
    match kind {
        TensorKind::Numpy if negatives > 1 => {
            return Err((RejectClass::Validation, "[1]", "more than one unknown (negative) dimension".into()));
        }
        TensorKind::Torch if nbytes == 0 => {
            if !shape.contains(&0) {
                return Err((RejectClass::Validation, "[1]", "an empty buffer needs a 0 dimension".into()));
            }
            if negatives > 0 {
                return Err((RejectClass::Validation, "[1]", "negative dimension with an empty buffer".into()));
            }
        }
        TensorKind::Torch => {
            if let Some(d) = shape.iter().find(|&&d| d < -1) {
                return Err((RejectClass::Validation, "[1]", format!("invalid dimension {d} (only -1 is inferred)")));
            }
            if negatives > 1 {
                return Err((RejectClass::Validation, "[1]", "more than one dimension to infer".into()));
            }
        }
        TensorKind::Numpy => {}
    }
    match resolve_shape(shape, nbytes / itemsize) {
        Some(_) => Ok(()),
        None => Err((
            RejectClass::Frames,
            "[2]",
            format!("buffer of {nbytes} bytes ({} items) does not fit the shape", nbytes / itemsize),
        )),
    }
}

/// Ext types: vLLM's decoder knows 3 (raw view); 1 and 2 (pickle) need
/// `VLLM_ALLOW_INSECURE_SERIALIZATION`, which a gateway never enables.
fn ext(t: i8, b: &[u8]) -> R<Value> {
    if t == 3 {
        Ok(Value::Ext(t, b.to_vec()))
    } else {
        Err(err(RejectClass::Type, format!("unsupported ext type {t} (only ext 3, raw buffers, is decoded)")))
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
