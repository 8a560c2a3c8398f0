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

use bytes::Bytes;

use crate::decode::Limits;
use crate::error::Error;
use crate::frames::RequestType;
use crate::registry::PerStruct;
use crate::schema::{python_type, vllm, ReleaseSchema, StructSchema, TensorKind, Ty};
use crate::typed::wire::Rel;
use crate::typed::{
    decode_typed_via_value, EngineCoreRequest, IntList, RequestOutputKind, SamplingParams, StopStrings, TokenIds,
};

mod int_runs;
mod reader;
use int_runs::dedup;
use reader::{Bail, Parser, P};

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

impl Parser<'_, '_, '_> {
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
}
