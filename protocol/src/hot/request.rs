//! A direct decoder of `EngineCoreRequest` (the ADD payload) into the typed
//! struct [`EngineCoreRequest`]: no [`Value`](crate::value::Value) tree for
//! what every request carries (the request id, the prompt token run, the
//! sampling parameters, the scalar fields).
//!
//! [`decode_request`] gives the verdict of
//! [`decode_typed_via_value`](crate::typed::decode_typed_via_value)
//! (`decode_message`, then the conversion to the struct) on the same frames
//! and limits, and on accept the same struct and drift:
//!
//! - the fields read here get the checks the schema-driven decoder applies
//!   to them (types, UTF-8, enum values, the positional length rules of
//!   msgspec's `array_like` structs, the nesting limit counted the same way,
//!   frame counts and sizes, trailing bytes; docs/wire-protocol.md §6,
//!   docs/limits.md);
//! - the rare fields (`mm_features`, `pooling_params`, `lora_request`,
//!   `prompt_embeds`, `prompt_is_token_ids`, `trace_headers`,
//!   `reasoning_parser_kwargs`, `kv_hints`; in `SamplingParams`
//!   `prompt_logprob_token_ids`, `structured_outputs`, `logit_bias`,
//!   `extra_args`, `_bad_words_token_ids`, `repetition_detection`) go
//!   through the schema-driven decoder on their own bytes, with the
//!   validators of their structs, then through the typed conversion;
//! - `SamplingParams.__post_init__` (docs/wire-protocol.md §10.2): the
//!   rules of [`crate::validate::SAMPLING_PARAMS_RULES`] (the table
//!   `validate::sampling_params` runs) are read from the typed fields; a
//!   request that breaks one (a value out of range, stop strings with
//!   `detokenize` false, greedy sampling with `n > 1`), or a rule this
//!   reader does not know, is handed to the reference path, whose error is
//!   returned;
//! - whatever this reader does not take (a malformed or refused message, an
//!   integer above `i64::MAX`, drift: extra trailing elements, unknown
//!   sampling keys) is decoded by the reference path, whose verdict,
//!   error (class, path, text), drift and unknown fields are returned.
//!   The verdicts are thus the reference path's by construction for
//!   everything handed over, and the differential tests
//!   (`protocol/tests/hot_request.rs`) and the fuzz target `hot_request`
//!   hold the accepted ones to it.
//!
//! Wire facts (docs/wire-protocol.md §3.1, §5.1, §7.1): frames are
//! `[b"\x00" (ADD), payload, aux...]`; `EngineCoreRequest` is a positional
//! array of 22 fields in 0.32 and 0.33, the first 9 required (a shorter
//! array is refused, missing trailing fields take their defaults);
//! `SamplingParams` is a map of the fields that differ from their defaults
//! (`omit_defaults`), read in any order, a repeated key's last value
//! winning; `stop` is `str | list[str]`; `_all_stop_token_ids` is a Python
//! set (duplicates collapse, first occurrence kept).

use std::borrow::Cow;

use bytes::Bytes;

use crate::decode::{check_tensor_shape, decode_sub, Limits};
use crate::error::Error;
use crate::frames::RequestType;
use crate::registry::PerStruct;
use crate::schema::{python_type, vllm, ReleaseSchema, StructSchema, TensorKind, Ty};
use crate::typed::wire::{Rel, WireType};
use crate::typed::{
    decode_typed_via_value, EngineCoreRequest, IntList, RequestOutputKind, SamplingParams, StopStrings, TokenArray,
    TokenIds, INT32_DTYPE, UINT32_DTYPE,
};
use crate::value::numpy_dtype;

/// Decodes the frames (`[type byte, payload, aux...]`) of one ADD of
/// `release` into the typed struct, with the verdict, struct and drift of
/// [`decode_typed_via_value`] (module docs). `typed::decode_typed` for
/// `EngineCoreRequest` calls this.
pub fn decode_request(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(EngineCoreRequest, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| decode_request_refs(release, frames, limits))
}

/// [`decode_request`] on frames already viewed as slices (`typed::decode_typed`'s path).
pub(crate) fn decode_request_refs(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
) -> Result<(EngineCoreRequest, Vec<String>), Error> {
    // Built in place: the struct is over a kilobyte, and each move of it
    // costs a tenth of reading a short request.
    let mut request = EngineCoreRequest::default();
    if fast(release, frames, None, limits, &mut request).is_some() {
        return Ok((request, Vec::new()));
    }
    decode_typed_via_value::<EngineCoreRequest>(release, frames, limits)
}

/// [`decode_request`] on frames held as shared buffers (what a ZeroMQ
/// binding hands over, `bytes::Bytes`): a 0.34.0 prompt array is a view of
/// the frame it arrived in (its aux frame, or the payload for an inline
/// one), not a copy, as vLLM's decoder reads it (`np.frombuffer` of the
/// received frame). Same verdicts, struct and drift as [`decode_request`].
///
/// ```
/// use bytes::Bytes;
/// use engine_protocol::hot::decode_request_shared;
/// use engine_protocol::typed::{EncodeOptions, EngineCoreRequest, Eos};
/// use engine_protocol::{Limits, VLLM_0_34_0};
///
/// let ids: Vec<i32> = (0..70_000).collect();
/// let request = EngineCoreRequest::builder("req-1", ids, 16, Eos::token(2)).build()?;
/// let frames: Vec<Bytes> = request.encode_shared(VLLM_0_34_0, &EncodeOptions::default())?;
/// assert_eq!(frames.len(), 3); // ADD, payload, the prompt's 280 000 bytes
/// let (decoded, drift) = decode_request_shared(VLLM_0_34_0, &frames, &Limits::default())?;
/// assert!(drift.is_empty());
/// let array = decoded.prompt_token_ids.as_ref().and_then(|p| p.array()).expect("an array");
/// // The same memory as the received frame: no copy.
/// assert_eq!(array.bytes().as_ptr(), frames[2].as_ptr());
/// assert_eq!(decoded, request);
/// # Ok::<(), engine_protocol::Error>(())
/// ```
pub fn decode_request_shared(
    release: &'static ReleaseSchema,
    frames: &[Bytes],
    limits: &Limits,
) -> Result<(EngineCoreRequest, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |refs| {
        let mut request = EngineCoreRequest::default();
        if fast(release, refs, frames.get(1..), limits, &mut request).is_some() {
            return Ok((request, Vec::new()));
        }
        decode_typed_via_value::<EngineCoreRequest>(release, refs, limits)
    })
}

/// The direct path alone: the struct when it reads the message itself,
/// `None` when it hands the message to the reference path (for the
/// differential tests, the fuzz target and the bench, which check that the
/// direct path is the one taken).
pub fn decode_request_direct(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
) -> Option<EngineCoreRequest> {
    let mut request = EngineCoreRequest::default();
    fast(release, frames, None, limits, &mut request).map(|()| request)
}

/// The fast path, reading into `request` (a default one): `None` hands
/// the message to the reference path (`request` is then partly written).
fn fast(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    shared: Option<&[Bytes]>,
    limits: &Limits,
    request: &mut EngineCoreRequest,
) -> Option<()> {
    let (schema, prompt) = table(release)?;
    let rel = Rel::of(release).ok()?;
    let (first, data) = frames.split_first()?;
    if !matches!(RequestType::from_frame(first), Ok(RequestType::Add)) {
        return None;
    }
    let payload = *data.first()?;
    if data.len() > limits.max_frames || data.iter().any(|f| f.len() > limits.max_frame_bytes) {
        return None;
    }
    let mut p = Parser {
        buf: payload,
        pos: 0,
        frames: data,
        shared,
        limits,
        depth: 0,
        tensor_budget: data.iter().map(|f| f.len()).sum(),
        rel,
        prompt,
    };
    p.request(schema, request).ok()?;
    (p.pos == payload.len()).then_some(())
}

/// How a table types the prompt: what the reader reads at field 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prompt {
    /// `list[int] | None` (up to 0.33.0).
    List,
    /// `numpy.ndarray | None` (0.34.0 on): an int array, read in place.
    Array,
}

/// The request table and how it types the prompt, when its layout is the
/// one read here: the fields of [`REQUEST_FIELDS`] in that order (the 22
/// of 0.32.0 and 0.33.0, `block_hashes` appended in 0.34.0), the ones read
/// directly of the types read here, the sampling parameters of
/// `vllm::SAMPLING_PARAMS`. Checked once per table (cached), so a new
/// release whose table keeps the layout is read here without code.
fn table(release: &'static ReleaseSchema) -> Option<(&'static StructSchema, Prompt)> {
    static LAYOUT: PerStruct<Option<Prompt>> = PerStruct::new();
    let s = release.engine_core_request.as_struct()?;
    let prompt = *LAYOUT.get(s, || layout(s, release));
    prompt.map(|p| (s, p))
}

fn layout(s: &'static StructSchema, release: &'static ReleaseSchema) -> Option<Prompt> {
    let names: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
    if names.len() < 22 || names.len() > REQUEST_FIELDS.len() || names[..] != REQUEST_FIELDS[..names.len()] {
        return None;
    }
    if s.min_len() != 9 || !std::ptr::eq(release.sampling_params, &vllm::SAMPLING_PARAMS) {
        return None;
    }
    let reference = &vllm::ENGINE_CORE_REQUEST_0_33;
    // The fields read directly keep their types; the others go through the
    // schema-driven decoder with whatever type the table gives.
    let direct = [0, 3, 5, 7, 8, 11, 12, 13, 15, 16, 17, 19, 20];
    let same = |i: usize| python_type(s.fields[i].ty) == python_type(reference.fields[i].ty);
    if !direct.iter().all(|&i| same(i))
        || !matches!(s.fields[3].ty, Ty::Optional(Ty::Struct(sp)) if std::ptr::eq(*sp, &vllm::SAMPLING_PARAMS))
    {
        return None;
    }
    match s.fields[1].ty {
        Ty::Optional(Ty::List(Ty::Int)) => Some(Prompt::List),
        Ty::Optional(Ty::Tensor(TensorKind::Numpy)) => Some(Prompt::Array),
        _ => None,
    }
}

/// The request fields, by position, as read here.
const REQUEST_FIELDS: [&str; 23] = [
    "request_id",
    "prompt_token_ids",
    "mm_features",
    "sampling_params",
    "pooling_params",
    "arrival_time",
    "lora_request",
    "cache_salt",
    "data_parallel_rank",
    "prompt_embeds",
    "prompt_is_token_ids",
    "client_index",
    "current_wave",
    "priority",
    "trace_headers",
    "resumable",
    "external_req_id",
    "reasoning_ended",
    "reasoning_parser_kwargs",
    "abort_immediately",
    "session_id",
    "kv_hints",
    "block_hashes",
];

/// "Not read here": the message goes to the reference path.
struct Bail;

type P<T> = Result<T, Bail>;

struct Parser<'a, 'f, 'l> {
    buf: &'a [u8],
    pos: usize,
    /// The data frames (payload first), for aux-frame tensors.
    frames: &'f [&'a [u8]],
    /// The same frames as shared buffers, when the caller holds them so:
    /// a prompt array is then a view of its frame.
    shared: Option<&'f [Bytes]>,
    limits: &'l Limits,
    depth: usize,
    tensor_budget: usize,
    rel: Rel,
    prompt: Prompt,
}

#[inline]
fn string(b: &[u8]) -> P<String> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(b.to_vec()) });
    }
    std::str::from_utf8(b).map(str::to_owned).map_err(|_| Bail)
}

#[inline]
fn be<const N: usize>(b: &[u8], at: usize) -> P<[u8; N]> {
    let s = b.get(at..at + N).ok_or(Bail)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

impl Parser<'_, '_, '_> {
    #[inline]
    fn peek(&self) -> P<u8> {
        self.buf.get(self.pos).copied().ok_or(Bail)
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Consumes a nil if one is next.
    #[inline]
    fn nil_next(&mut self) -> bool {
        if self.buf.get(self.pos) == Some(&0xc0) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    #[inline]
    fn enter(&mut self) -> P<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Bail);
        }
        Ok(())
    }

    /// A declared element count the remaining input can hold
    /// (`bytes_each` bytes each at least, as the reference decoder checks).
    #[inline]
    fn count(&self, n: usize, bytes_each: usize) -> P<usize> {
        if n.saturating_mul(bytes_each) > self.remaining() {
            return Err(Bail);
        }
        Ok(n)
    }

    /// An array header.
    #[inline]
    fn array_len(&mut self) -> P<usize> {
        let b = self.peek()?;
        let (n, k) = match b {
            0x90..=0x9f => ((b & 0x0f) as usize, 1),
            0xdc => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdd => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        self.pos += k;
        self.count(n, 1)
    }

    /// A map header.
    #[inline]
    fn map_len(&mut self) -> P<usize> {
        let b = self.peek()?;
        let (n, k) = match b {
            0x80..=0x8f => ((b & 0x0f) as usize, 1),
            0xde => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdf => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        self.pos += k;
        self.count(n, 2)
    }

    /// The bytes of a `str`, unchecked.
    #[inline]
    fn str_bytes(&mut self) -> P<&[u8]> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xa0..=0xbf => ((b & 0x1f) as usize, 1),
            0xd9 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xda => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdb => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let at = self.pos + k;
        let s = self.buf.get(at..at.checked_add(n).ok_or(Bail)?).ok_or(Bail)?;
        self.pos = at + n;
        Ok(s)
    }

    #[inline]
    fn string(&mut self) -> P<String> {
        let b = self.str_bytes()?;
        string(b)
    }

    #[inline]
    fn opt_string(&mut self) -> P<Option<String>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.string().map(Some)
    }

    #[inline]
    fn bool(&mut self) -> P<bool> {
        let v = match self.peek()? {
            0xc2 => false,
            0xc3 => true,
            _ => return Err(Bail),
        };
        self.pos += 1;
        Ok(v)
    }

    #[inline]
    fn opt_bool(&mut self) -> P<Option<bool>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.bool().map(Some)
    }

    /// An integer that fits `i64` (one above it, rare on the wire, is
    /// handed over: the reference path reads it into the struct's `i128`).
    #[inline]
    fn int64(&mut self) -> P<i64> {
        let (v, k) = read_int(self.buf, self.pos)?;
        self.pos += k;
        Ok(v)
    }

    /// An `int` field's value, read by [`Self::int64`].
    #[inline]
    fn int(&mut self) -> P<i128> {
        self.int64().map(i128::from)
    }

    #[inline]
    fn opt_int(&mut self) -> P<Option<i128>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.int().map(Some)
    }

    /// A `float` field: float64, float32 (widened) or an integer (as the
    /// typed conversion reads it).
    #[inline]
    fn float(&mut self) -> P<f64> {
        match self.peek()? {
            0xcb => {
                let v = f64::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 9;
                Ok(v)
            }
            0xca => {
                let v = f32::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 5;
                Ok(v as f64)
            }
            0xcf => {
                let u = u64::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 9;
                Ok(u as f64)
            }
            _ => self.int64().map(|i| i as f64),
        }
    }

    /// A `list[int]` one level down, every element fitting `i64` (one
    /// above it is handed over, as by [`Self::int64`]).
    fn int_list(&mut self) -> P<Vec<i64>> {
        let n = self.array_len()?;
        self.enter()?;
        let mut out: Vec<i64> = Vec::with_capacity(n);
        self.pos = int_run(self.buf, self.pos, &mut out.spare_capacity_mut()[..n])?;
        // SAFETY: `int_run` wrote all `n` elements (it returns `Ok` only
        // then), and `n` is within the capacity.
        unsafe { out.set_len(n) };
        self.depth -= 1;
        Ok(out)
    }

    #[inline]
    fn opt_int_list(&mut self) -> P<Option<IntList>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.int_list().map(|xs| Some(IntList::from(xs)))
    }

    /// An ndarray prompt (`[dtype, shape, data]`), or nil, with the
    /// checks of vLLM's decode hook as the schema-driven decoder applies
    /// them (a dtype numpy parses, a shape the bytes fit, an aux index in
    /// range, the tensor budget); what it refuses is handed over. The ids
    /// are the frame's own bytes when the frames are shared, else copied
    /// once.
    fn opt_token_array(&mut self) -> P<Option<TokenIds>> {
        if self.nil_next() {
            return Ok(None);
        }
        if self.array_len()? != 3 {
            return Err(Bail);
        }
        self.enter()?;
        let dtype_bytes = self.str_bytes()?;
        let dtype: Cow<'static, str> = match dtype_bytes {
            b"<i4" => Cow::Borrowed(INT32_DTYPE),
            b"=u4" => Cow::Borrowed(UINT32_DTYPE),
            other => Cow::Owned(std::str::from_utf8(other).map_err(|_| Bail)?.to_owned()),
        };
        let parsed = numpy_dtype(&dtype).ok_or(Bail)?;
        let dims = self.array_len()?;
        let mut shape = Vec::with_capacity(dims);
        for _ in 0..dims {
            shape.push(self.int64()?);
        }
        let (frame, range) = match self.peek()? {
            0xc7..=0xc9 | 0xd4..=0xd8 => {
                let (ty, body) = self.ext()?;
                if ty != 3 {
                    return Err(Bail);
                }
                (0, body)
            }
            0xc4..=0xc6 => (0, self.bin()?),
            _ => {
                let i = self.int64()?;
                let frame = usize::try_from(i).map_err(|_| Bail)?;
                let f = *self.frames.get(frame).ok_or(Bail)?;
                (frame, 0..f.len())
            }
        };
        let nbytes = range.len();
        if check_tensor_shape(TensorKind::Numpy, &shape, nbytes, parsed.elem.size()).is_err()
            || nbytes > self.tensor_budget
        {
            return Err(Bail);
        }
        self.tensor_budget -= nbytes;
        let data = match self.shared {
            Some(frames) => frames[frame].slice(range),
            None => Bytes::copy_from_slice(&self.frames[frame][range]),
        };
        self.depth -= 1;
        Ok(Some(TokenIds::from_array(TokenArray::checked(dtype, parsed, shape, data))))
    }

    /// An ext value: its type and where its body lies in the payload.
    fn ext(&mut self) -> P<(i8, std::ops::Range<usize>)> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xd4 => (1, 1),
            0xd5 => (2, 1),
            0xd6 => (4, 1),
            0xd7 => (8, 1),
            0xd8 => (16, 1),
            0xc7 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xc8 => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xc9 => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let ty = be::<1>(self.buf, self.pos + k)?[0] as i8;
        let at = self.pos + k + 1;
        let end = at.checked_add(n).ok_or(Bail)?;
        if end > self.buf.len() {
            return Err(Bail);
        }
        self.pos = end;
        Ok((ty, at..end))
    }

    /// A `bin` value: where its bytes lie in the payload.
    fn bin(&mut self) -> P<std::ops::Range<usize>> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xc4 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xc5 => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xc6 => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let at = self.pos + k;
        let end = at.checked_add(n).ok_or(Bail)?;
        if end > self.buf.len() {
            return Err(Bail);
        }
        self.pos = end;
        Ok(at..end)
    }

    /// A `list[str]` one level down.
    fn str_list(&mut self) -> P<Vec<String>> {
        let n = self.array_len()?;
        self.enter()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.string()?);
        }
        self.depth -= 1;
        Ok(out)
    }

    /// The value of `ty` (not nil) through the schema-driven decoder on its
    /// own bytes, then the typed conversion.
    fn sub<T: WireType>(&mut self, ty: &'static Ty) -> P<T> {
        let sub =
            decode_sub(ty, self.frames, self.pos, self.depth, self.tensor_budget, self.limits).map_err(|_| Bail)?;
        if sub.drift {
            return Err(Bail);
        }
        self.tensor_budget = sub.tensor_budget;
        self.pos = sub.end;
        T::from_value(&sub.value, None, self.rel).map_err(|_| Bail)
    }

    /// An optional field read by [`Self::sub`].
    #[inline]
    fn opt_sub<T: WireType>(&mut self, ty: &'static Ty) -> P<Option<T>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.sub::<Option<T>>(ty)
    }

    fn request(&mut self, s: &'static StructSchema, r: &mut EngineCoreRequest) -> P<()> {
        let n = self.array_len()?;
        self.enter()?;
        let nf = s.fields.len();
        if n < s.min_len() || n > nf {
            // Too short is refused, longer is drift: both the reference
            // path's.
            return Err(Bail);
        }
        let ty = |i: usize| s.fields[i].ty;
        for i in 0..n {
            match i {
                0 => r.request_id = self.string()?,
                1 => {
                    r.prompt_token_ids = match self.prompt {
                        Prompt::List => self.opt_int_list()?.map(TokenIds::from_list),
                        Prompt::Array => self.opt_token_array()?,
                    }
                }
                2 => r.mm_features = self.opt_sub(ty(i))?,
                3 => {
                    if !self.nil_next() {
                        self.sampling_params(r.sampling_params.insert(SamplingParams::default()))?;
                    }
                }
                4 => r.pooling_params = self.opt_sub(ty(i))?,
                5 => r.arrival_time = self.float()?,
                6 => r.lora_request = self.opt_sub(ty(i))?,
                7 => r.cache_salt = self.opt_string()?,
                8 => r.data_parallel_rank = self.opt_int()?,
                9 => r.prompt_embeds = self.opt_sub(ty(i))?,
                10 => r.prompt_is_token_ids = self.opt_sub(ty(i))?,
                11 => r.client_index = self.int()?,
                12 => r.current_wave = self.int()?,
                13 => r.priority = self.int()?,
                14 => r.trace_headers = self.opt_sub(ty(i))?,
                15 => r.resumable = self.bool()?,
                16 => r.external_req_id = self.opt_string()?,
                17 => r.reasoning_ended = self.opt_bool()?,
                18 => r.reasoning_parser_kwargs = self.opt_sub(ty(i))?,
                19 => r.abort_immediately = self.bool()?,
                20 => r.session_id = self.opt_string()?,
                21 => r.kv_hints = self.opt_sub(ty(i))?,
                22 => r.block_hashes = self.opt_sub(ty(i))?,
                _ => return Err(Bail),
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// `SamplingParams` (a map, not nil), its `__post_init__` rules checked
    /// by `typed::plainly_valid` (the rule tables' interpreter on the struct).
    fn sampling_params(&mut self, sp: &mut SamplingParams) -> P<()> {
        let n = self.map_len()?;
        self.enter()?;
        let s = &vllm::SAMPLING_PARAMS;
        let ty = |i: usize| s.fields[i].ty;
        for _ in 0..n {
            let key = self.str_bytes()?;
            match key {
                b"n" => sp.n = self.int()?,
                b"presence_penalty" => sp.presence_penalty = self.float()?,
                b"frequency_penalty" => sp.frequency_penalty = self.float()?,
                b"repetition_penalty" => sp.repetition_penalty = self.float()?,
                b"temperature" => sp.temperature = self.float()?,
                b"watermarking" => sp.watermarking = self.opt_bool()?,
                b"top_p" => sp.top_p = self.float()?,
                b"top_k" => sp.top_k = self.int()?,
                b"min_p" => sp.min_p = self.float()?,
                b"seed" => sp.seed = self.opt_int()?,
                b"stop" => {
                    sp.stop = if self.nil_next() {
                        None
                    } else if self.peek()? & 0xf0 == 0x90 || matches!(self.peek()?, 0xdc | 0xdd) {
                        Some(StopStrings::Many(self.str_list()?))
                    } else {
                        Some(StopStrings::One(self.string()?))
                    }
                }
                b"stop_token_ids" => sp.stop_token_ids = self.opt_int_list()?,
                b"ignore_eos" => sp.ignore_eos = self.bool()?,
                b"max_tokens" => sp.max_tokens = self.opt_int()?,
                b"min_tokens" => sp.min_tokens = self.int()?,
                b"logprobs" => sp.logprobs = self.opt_int()?,
                b"prompt_logprobs" => sp.prompt_logprobs = self.opt_int()?,
                b"prompt_logprob_token_ids" => sp.prompt_logprob_token_ids = self.opt_sub(ty(17))?,
                b"prompt_logprob_start" => sp.prompt_logprob_start = self.opt_int()?,
                b"logprob_token_ids" => sp.logprob_token_ids = self.opt_int_list()?,
                b"flat_logprobs" => sp.flat_logprobs = self.bool()?,
                b"detokenize" => sp.detokenize = self.bool()?,
                b"skip_special_tokens" => sp.skip_special_tokens = self.bool()?,
                b"spaces_between_special_tokens" => sp.spaces_between_special_tokens = self.bool()?,
                b"include_stop_str_in_output" => sp.include_stop_str_in_output = self.bool()?,
                b"output_kind" => sp.output_kind = RequestOutputKind::from_wire(self.int64()?).ok_or(Bail)?,
                b"stream_interval" => sp.stream_interval = self.opt_int()?,
                b"skip_clone" => sp.skip_clone = self.bool()?,
                b"output_text_buffer_length" => sp.output_text_buffer_length = self.int()?,
                b"_eos_token_id" => sp.eos_token_id = self.opt_int()?,
                b"_all_stop_token_ids" => {
                    let mut ids = self.int_list()?;
                    dedup(&mut ids);
                    sp.all_stop_token_ids = IntList::from(ids);
                }
                b"_watermarking_skipped" => sp.watermarking_skipped = self.bool()?,
                b"structured_outputs" => sp.structured_outputs = self.opt_sub(ty(32))?,
                b"logit_bias" => sp.logit_bias = self.opt_sub(ty(33))?,
                b"allowed_token_ids" => sp.allowed_token_ids = self.opt_int_list()?,
                b"extra_args" => sp.extra_args = self.opt_sub(ty(35))?,
                b"bad_words" => {
                    sp.bad_words = if self.nil_next() { None } else { Some(self.str_list()?) };
                }
                b"_bad_words_token_ids" => sp.bad_words_token_ids = self.opt_sub(ty(37))?,
                b"skip_reading_prefix_cache" => sp.skip_reading_prefix_cache = self.opt_bool()?,
                b"thinking_token_budget" => sp.thinking_token_budget = self.opt_int()?,
                b"repetition_detection" => sp.repetition_detection = self.opt_sub(ty(40))?,
                b"routed_experts_prompt_start" => sp.routed_experts_prompt_start = self.int()?,
                b"trace_decode_token_ids" => sp.trace_decode_token_ids = self.opt_int_list()?,
                // An unknown key is drift.
                _ => return Err(Bail),
            }
        }
        self.depth -= 1;
        if !crate::typed::plainly_valid(sp) {
            return Err(Bail);
        }
        Ok(())
    }
}

/// Values read per bounds check by [`int_run`].
const RUN_BLOCK: usize = 16;

/// Reads `out.len()` integers starting at `at` into `out`; the position
/// after them. Token ids take the 1-5 byte forms (positive fixint,
/// uint8/16/32): while [`RUN_BLOCK`] such values of up to 5 bytes fit in
/// the bytes left, a block of them is read after one bounds check; any
/// other form, and the values near the frame's end, go through
/// [`read_int`], one bounds check each.
///
/// A branch per form, not a table: the position of the next value depends
/// on this one's size, and a table lookup puts two loads on that chain
/// (measured at twice the time of this loop on the 512-token request of
/// `docs/bench.md`), where a predicted branch puts none.
#[inline]
fn int_run(b: &[u8], mut at: usize, out: &mut [std::mem::MaybeUninit<i64>]) -> P<usize> {
    let mut i = 0;
    while i < out.len() {
        if out.len() - i >= RUN_BLOCK {
            if let Some(window) = b.get(at..at + 5 * RUN_BLOCK) {
                let (read, used) = token_block(window, &mut out[i..i + RUN_BLOCK]);
                i += read;
                at += used;
                if read == RUN_BLOCK {
                    continue;
                }
            }
        }
        let (v, k) = read_int(b, at)?;
        out[i].write(v);
        at += k;
        i += 1;
    }
    Ok(at)
}

/// Reads up to `out.len()` values of the token-id forms from `window`,
/// which holds at least 5 bytes per slot of `out`; stops at the first other
/// form. The number of values read and the bytes they took.
#[inline(always)]
fn token_block(window: &[u8], out: &mut [std::mem::MaybeUninit<i64>]) -> (usize, usize) {
    debug_assert!(window.len() >= 5 * out.len());
    let mut at = 0;
    for (read, slot) in out.iter_mut().enumerate() {
        // SAFETY: each value read so far took at most 5 bytes, so
        // `at <= 5 * read` and `at + 5 <= 5 * out.len() <= window.len()`:
        // the bytes `at..at + 5` are in the window.
        let w = |k: usize| unsafe { *window.get_unchecked(at + k) };
        let m = w(0);
        let (v, k) = match m {
            0x00..=0x7f => (m as i64, 1),
            0xcd => (u16::from_be_bytes([w(1), w(2)]) as i64, 3),
            0xce => (u32::from_be_bytes([w(1), w(2), w(3), w(4)]) as i64, 5),
            0xcc => (w(1) as i64, 2),
            _ => return (read, at),
        };
        slot.write(v);
        at += k;
    }
    (out.len(), at)
}

/// One MessagePack integer at `at` that fits `i64`, and its size.
#[inline(always)]
fn read_int(b: &[u8], at: usize) -> P<(i64, usize)> {
    let m = *b.get(at).ok_or(Bail)?;
    Ok(match m {
        0x00..=0x7f => (m as i64, 1),
        0xe0..=0xff => (m as i8 as i64, 1),
        0xcc => (be::<1>(b, at + 1)?[0] as i64, 2),
        0xcd => (u16::from_be_bytes(be(b, at + 1)?) as i64, 3),
        0xce => (u32::from_be_bytes(be(b, at + 1)?) as i64, 5),
        0xcf => (i64::try_from(u64::from_be_bytes(be(b, at + 1)?)).map_err(|_| Bail)?, 9),
        0xd0 => (be::<1>(b, at + 1)?[0] as i8 as i64, 2),
        0xd1 => (i16::from_be_bytes(be(b, at + 1)?) as i64, 3),
        0xd2 => (i32::from_be_bytes(be(b, at + 1)?) as i64, 5),
        0xd3 => (i64::from_be_bytes(be(b, at + 1)?), 9),
        _ => return Err(Bail),
    })
}

/// Python set semantics: duplicates collapse, the first occurrence kept.
fn dedup(xs: &mut Vec<i64>) {
    if xs.len() < 2 {
        return;
    }
    if xs.len() <= 16 {
        let mut kept = 0;
        for i in 0..xs.len() {
            let x = xs[i];
            if !xs[..kept].contains(&x) {
                xs[kept] = x;
                kept += 1;
            }
        }
        xs.truncate(kept);
    } else {
        let mut seen = std::collections::HashSet::with_capacity(xs.len());
        xs.retain(|x| seen.insert(*x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Default as D;

    #[test]
    fn every_typed_vllm_request_table_has_the_layout_read_here() {
        for (v, prompt) in [("0.32.0", Prompt::List), ("0.33.0", Prompt::List), ("0.34.0", Prompt::Array)] {
            let rel = crate::release(crate::schema::Dialect::Vllm, v).expect("table");
            let (s, read_as) = table(rel).expect("a known request table");
            assert_eq!(read_as, prompt, "{v}");
            let names: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
            assert_eq!(names, REQUEST_FIELDS[..names.len()], "{v}");
            assert_eq!(s.min_len(), 9, "{v}");
            assert!(std::ptr::eq(rel.sampling_params, &vllm::SAMPLING_PARAMS), "{v}");
        }
        // Older tables differ in the fields read directly: the reference path.
        for v in ["0.22.0", "0.26.0", "0.31.0"] {
            let rel = crate::release(crate::schema::Dialect::Vllm, v).expect("table");
            assert!(table(rel).is_none(), "{v}");
        }
        // The sampling fields read through the schema-driven decoder, by
        // position.
        let sp = &vllm::SAMPLING_PARAMS;
        let by_pos: Vec<(usize, &str)> = [17, 32, 33, 35, 37, 40].iter().map(|&i| (i, sp.fields[i].name)).collect();
        assert_eq!(
            by_pos,
            [
                (17, "prompt_logprob_token_ids"),
                (32, "structured_outputs"),
                (33, "logit_bias"),
                (35, "extra_args"),
                (37, "_bad_words_token_ids"),
                (40, "repetition_detection")
            ]
        );
        // Every sampling field has a default (none is required), so an
        // absent key is never an error.
        assert!(sp.fields.iter().all(|f| f.default != D::Required));
        assert_eq!(sp.fields.len(), 43);
    }

    #[test]
    fn int_runs_read_every_form_as_read_int_does_up_to_the_frame_end() {
        // Every form and boundary (2^k - 1, 2^k for k up to 40, negatives),
        // written by the encoder, in runs that end at every distance from
        // the frame's end (the window path and the tail path).
        let mut xs: Vec<i64> = (0..=40).flat_map(|k| [(1i64 << k) - 1, 1 << k]).collect();
        xs.extend([-1, -32, -33, -128, -129, -32768, -32769, i32::MIN as i64, i64::MIN, i64::MAX]);
        for n in 0..=xs.len() {
            let mut b = Vec::new();
            for &x in &xs[..n] {
                crate::msgpack::write::int(&mut b, x);
            }
            let mut out = vec![std::mem::MaybeUninit::uninit(); n];
            let end = int_run(&b, 0, &mut out).unwrap_or_else(|_| panic!("{n} values refused"));
            assert_eq!(end, b.len());
            // SAFETY: `int_run` returned Ok, so it wrote all `n` slots.
            let got: Vec<i64> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert_eq!(got, xs[..n]);
        }
        // A value cut short by the frame end is refused.
        let mut out = [std::mem::MaybeUninit::uninit(); 1];
        assert!(int_run(&[0xce, 0, 1], 0, &mut out).is_err());
    }

    #[test]
    fn integers_decode_in_every_form_that_fits_i64_and_refuse_the_rest() {
        let cases: [(&[u8], Option<i64>); 12] = [
            (&[0x05], Some(5)),
            (&[0xfd], Some(-3)),
            (&[0xcc, 200], Some(200)),
            (&[0xcd, 0x03, 0xe8], Some(1000)),
            (&[0xce, 0, 1, 0x11, 0x70], Some(70000)),
            (&[0xcf, 0, 0, 1, 0, 0, 0, 0, 0], Some(1 << 40)),
            (&[0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0], None),
            (&[0xd0, 0x9c], Some(-100)),
            (&[0xd1, 0xfc, 0x18], Some(-1000)),
            (&[0xd2, 0xff, 0xfe, 0xee, 0x90], Some(-70000)),
            (&[0xcd, 0x03], None),
            (&[0xc0], None),
        ];
        for (bytes, want) in cases {
            assert_eq!(read_int(bytes, 0).ok().map(|(v, _)| v), want, "{bytes:x?}");
        }
    }

    #[test]
    fn set_dedup_keeps_first_occurrences_in_order() {
        let mut short = vec![3, 1, 3, 2, 1];
        dedup(&mut short);
        assert_eq!(short, [3, 1, 2]);
        let mut long: Vec<i64> = (0..40).map(|i| i % 7).collect();
        dedup(&mut long);
        assert_eq!(long, [0, 1, 2, 3, 4, 5, 6]);
    }
}
