//! Whole messages: the [`Message`] trait over the generated structs that
//! are messages (their kind and error root), the checked encode of
//! `EngineCoreRequest` (vLLM's `__post_init__` rules before the bytes),
//! ABORT (an array of request-id strings after its type byte; docs/wire-protocol.md
//! §7.10) and the typed decoders, with the verdicts of [`decode_message`].

use super::wire::{self, At, Enc, Rel, WireType};
use super::{
    plainly_valid, EncodeOptions, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest,
    EngineHandshakeMetadata, HandshakeStatus, StartDpWave, UtilityOutput, UtilityRequest,
};
use crate::decode::{decode_payload, Limits};
use crate::error::Error;
use crate::message::{decode_message, MessageKind};
use crate::schema::{ReleaseSchema, Ty};
use crate::value::{Tensor, Value};

/// How [`decode_typed`] reads the frames of a message: implemented for
/// every [`Message`] by the decoding layer above these structs
/// (`crate::hot`): the direct decoder [`crate::hot::decode_request`] for
/// `EngineCoreRequest` (same verdicts, struct and drift as the reference
/// path), [`decode_typed_via_value`] for every other message.
pub trait DecodeFrames: Sized {
    /// Decodes the frames of one message as this struct.
    fn decode_frames(
        release: &'static ReleaseSchema,
        frames: &[&[u8]],
        limits: &Limits,
    ) -> Result<(Self, Vec<String>), Error>;
}

/// A generated struct that is a whole message.
pub trait Message: WireType + DecodeFrames {
    /// The message kind it is sent as (`HandshakeStatus` is HELLO and
    /// READY alike; its kind here is HELLO).
    const KIND: MessageKind;
    /// The root of error paths.
    const NAME: &'static str;
}

macro_rules! message {
    ($t:ident, $kind:ident) => {
        impl Message for $t {
            const KIND: MessageKind = MessageKind::$kind;
            const NAME: &'static str = stringify!($t);
        }

        impl $t {
            /// From a decoded value of `release` (as [`crate::decode_message`]
            /// returns it); errors name the path of the field. A value holds
            /// no unknown fields, so `unknown` stays empty: [`decode_typed`]
            /// keeps them.
            pub fn from_value(release: &'static ReleaseSchema, v: &Value) -> Result<Self, Error> {
                let rel = Rel::of(release)?;
                <Self as WireType>::from_value(v, None, rel).map_err(|e| e.under(Self::NAME))
            }

            /// To a value of `release`, for [`crate::encode_message`]. Fails
            /// when a field `release` lacks is set; unknown fields are left out.
            pub fn to_value(&self, release: &'static ReleaseSchema) -> Result<Value, Error> {
                let rel = Rel::of(release)?;
                <Self as WireType>::to_value(self, MessageKind::$kind.payload_type(release), rel)
                    .map_err(|e| e.under(Self::NAME))
            }

            /// The frames of this message for `release`, written straight
            /// from the struct (request-type byte first for input-socket
            /// messages, aux frames after the payload), as owned vectors
            /// (an aux frame's bytes copied: [`Self::encode_shared`]
            /// shares them).
            pub fn encode(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(Vec::with_capacity(<Self as WireSize>::wire_size(self, rel)));
                <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME))?;
                let mut frames = Vec::with_capacity(2 + e.aux.len());
                if let Some(t) = MessageKind::$kind.request_type() {
                    frames.push(vec![t.byte()]);
                }
                let aux = if e.shared.is_empty() { std::mem::take(&mut e.aux) } else { e.aux_owned() };
                frames.push(e.out);
                frames.extend(aux);
                Ok(frames)
            }

            /// The frames of this message for `release` as shared buffers,
            /// in one call: request-type byte, payload, then every aux
            /// frame, an array held as [`bytes::Bytes`] (a 0.34.0 prompt,
            /// [`TokenIds`](super::TokenIds)) shared with the struct, not copied. `options`
            /// sets what vLLM's encoder reads from its environment (the
            /// zero-copy threshold).
            pub fn encode_shared(
                &self,
                release: &'static ReleaseSchema,
                options: &EncodeOptions,
            ) -> Result<Vec<bytes::Bytes>, Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(Vec::with_capacity(<Self as WireSize>::wire_size(self, rel)));
                e.zero_copy_threshold = options.zero_copy_threshold;
                <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME))?;
                let mut frames = Vec::with_capacity(2 + e.aux.len());
                if let Some(t) = MessageKind::$kind.request_type() {
                    frames.push(bytes::Bytes::from_static(t.frame()));
                }
                let aux = e.aux_shared();
                frames.push(bytes::Bytes::from(e.out));
                frames.extend(aux);
                Ok(frames)
            }

            /// Writes the payload into `out` (appending) and its aux frames
            /// into `aux`, for callers that reuse buffers. On error `out`
            /// may hold a partial payload.
            pub fn encode_into(
                &self,
                release: &'static ReleaseSchema,
                out: &mut Vec<u8>,
                aux: &mut Vec<Vec<u8>>,
            ) -> Result<(), Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(std::mem::take(out));
                e.aux = std::mem::take(aux);
                let r = <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME));
                *aux = e.aux_owned();
                *out = e.out;
                r
            }
        }
    };
}

/// A capacity guess for a message's payload, so that the direct encoder
/// writes without growing its buffer in the common case (token ids take at
/// most 5 bytes in practice, tensors their data plus a small header).
trait WireSize {
    fn wire_size(&self, _rel: Rel) -> usize {
        256
    }
}

impl WireSize for EngineCoreRequest {
    /// A prompt's ids take at most 5 bytes each in a list; an array takes
    /// its bytes inline below the threshold and a few bytes for its aux
    /// frame's index above it (0.34.0 on).
    fn wire_size(&self, rel: Rel) -> usize {
        let prompt = self.prompt_token_ids.as_ref().map_or(0, |t| {
            let in_array = rel
                .schema
                .engine_core_request
                .as_struct()
                .and_then(|s| s.fields.get(1))
                .is_some_and(|f| matches!(wire::unwrap_optional(f.ty), Ty::Tensor(_)));
            match (in_array, t.array()) {
                (false, _) => t.len() * 5,
                (true, Some(a)) if a.bytes().len() >= crate::encode::ZERO_COPY_THRESHOLD => 24,
                (true, _) => t.len() * 5 + 24,
            }
        });
        256 + self.request_id.len() + prompt
    }
}

impl WireSize for EngineCoreOutputs {
    fn wire_size(&self, _rel: Rel) -> usize {
        let tensor =
            |t: &Tensor| if t.data.len() < crate::encode::ZERO_COPY_THRESHOLD { t.data.len() + 32 } else { 40 };
        64 + self
            .outputs
            .iter()
            .map(|o| {
                40 + o.request_id.len()
                    + o.new_token_ids.len() * 5
                    + o.new_logprobs.as_ref().map_or(0, |l| {
                        tensor(&l.logprob_token_ids) + tensor(&l.logprobs) + tensor(&l.sampled_token_ranks) + 8
                    })
            })
            .sum::<usize>()
    }
}

impl WireSize for UtilityOutput {}
impl WireSize for EngineCoreReadyResponse {}
impl WireSize for HandshakeStatus {}
impl WireSize for EngineHandshakeMetadata {}
impl WireSize for UtilityRequest {}
impl WireSize for StartDpWave {}

message!(EngineCoreRequest, EngineCoreRequest);
message!(EngineCoreOutputs, EngineCoreOutputs);
message!(UtilityOutput, UtilityOutput);
message!(EngineCoreReadyResponse, EngineCoreReadyResponse);
message!(HandshakeStatus, HandshakeHello);
message!(EngineHandshakeMetadata, HandshakeInit);
message!(UtilityRequest, UtilityRequest);
message!(StartDpWave, StartDpWave);

impl EngineCoreRequest {
    /// [`EngineCoreRequest::encode`] after vLLM's `__post_init__` rules
    /// (the ones its decoder runs: `SamplingParams`,
    /// `StructuredOutputsParams`, `LoRARequest`,
    /// `RepetitionDetectionParams`; docs/wire-protocol.md §10) and after
    /// what the engine fails at run time although its decoder accepts it
    /// (no request id, no prompt, no `max_tokens`, a constraint without
    /// `_backend`: [`EngineCoreRequest::serving_problems`]' fatal ones but
    /// the prompt's length, which needs the engine's `max_model_len`). A
    /// request the engine would refuse or fail is an error of class
    /// `validation` naming the field, never bytes; [`Error::serving`] is
    /// set for the run-time ones. A request served otherwise than meant (no
    /// `_eos_token_id`) is written: `serving_problems` warns of it.
    ///
    /// Sampling parameters whose every rule plainly holds (the common
    /// request) are checked on the struct; anything else (a nested struct
    /// with rules of its own, a value at or past a rule's edge) through the
    /// value tree and [`encode_message`](crate::encode_message)'s checks,
    /// whose error is returned.
    ///
    /// ```
    /// use engine_protocol::typed::{Constraint, EngineCoreRequest, SamplingParams, ServingProblem, StructuredOutputsParams};
    /// use engine_protocol::{RejectClass, VLLM_0_33_0};
    ///
    /// let mut request = EngineCoreRequest {
    ///     request_id: "r1".into(),
    ///     prompt_token_ids: Some(vec![1, 2].into()),
    ///     sampling_params: Some(SamplingParams { max_tokens: None, ..SamplingParams::default() }),
    ///     ..EngineCoreRequest::default()
    /// };
    /// let e = request.encode_checked(VLLM_0_33_0).unwrap_err();
    /// assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, "EngineCoreRequest.sampling_params.max_tokens"));
    /// assert_eq!(e.serving, Some(ServingProblem::NoMaxTokens));
    ///
    /// let sp = request.sampling_params.as_mut().unwrap();
    /// sp.max_tokens = Some(8);
    /// sp.structured_outputs = Some(StructuredOutputsParams::without_backend(Constraint::Regex("a+".into())));
    /// let e = request.encode_checked(VLLM_0_33_0).unwrap_err();
    /// assert_eq!(e.serving, Some(ServingProblem::ConstraintWithoutBackend));
    ///
    /// // No EOS id: written (served, never stopping on EOS), and warned of.
    /// request.sampling_params.as_mut().unwrap().structured_outputs = None;
    /// assert!(request.encode_checked(VLLM_0_33_0).is_ok());
    /// assert_eq!(request.serving_problems(None), [ServingProblem::NoEosTokenId]);
    /// ```
    pub fn encode_checked(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
        self.check_sendable(release)?;
        self.encode(release)
    }

    /// [`EngineCoreRequest::encode_checked`] with the frames as shared
    /// buffers ([`EngineCoreRequest::encode_shared`]): one call gives the
    /// whole multi-frame ADD, a long 0.34.0 prompt's array as its aux frame
    /// without a copy.
    pub fn encode_checked_shared(
        &self,
        release: &'static ReleaseSchema,
        options: &EncodeOptions,
    ) -> Result<Vec<bytes::Bytes>, Error> {
        self.check_sendable(release)?;
        self.encode_shared(release, options)
    }

    /// What [`EngineCoreRequest::encode_checked`] refuses.
    fn check_sendable(&self, release: &'static ReleaseSchema) -> Result<(), Error> {
        let plain = self.lora_request.is_none()
            && self.sampling_params.as_ref().is_none_or(|sp| {
                sp.structured_outputs.is_none() && sp.repetition_detection.is_none() && plainly_valid(sp)
            });
        if !plain {
            crate::message::encode_message(release, MessageKind::EngineCoreRequest, &self.to_value(release)?)?;
        }
        if let Some(problem) = self.first_fatal_problem(None) {
            return Err(Error::unservable(problem));
        }
        Ok(())
    }
}

/// The frames of an ABORT of the engine requests `request_ids`:
/// `[0x01, array of the ids]`, the same in every release of both dialects
/// (docs/wire-protocol.md §7; the engine answers nothing for an id it does
/// not know).
///
/// ```
/// use engine_protocol::typed::{decode_abort, encode_abort};
/// use engine_protocol::{release, Dialect, Limits};
///
/// let frames = encode_abort(&["req-1", "req-2"]);
/// assert_eq!(frames, [vec![0x01], vec![0x92, 0xa5, b'r', b'e', b'q', b'-', b'1', 0xa5, b'r', b'e', b'q', b'-', b'2']]);
/// let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
/// let v033 = release(Dialect::Vllm, "0.33.0")?;
/// assert_eq!(decode_abort(v033, &refs, &Limits::default())?, ["req-1", "req-2"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_abort<S: AsRef<str>>(request_ids: &[S]) -> Vec<Vec<u8>> {
    use crate::msgpack::write;
    let mut out = Vec::with_capacity(8 + request_ids.iter().map(|r| r.as_ref().len() + 5).sum::<usize>());
    write::array_len(&mut out, request_ids.len() as u32);
    for r in request_ids {
        write::str(&mut out, r.as_ref());
    }
    let t = MessageKind::AbortRequest.request_type().map_or(1, |t| t.byte());
    vec![vec![t], out]
}

/// The ids of an ABORT of either dialect (`rel` is the dialect's view of
/// `release`; errors rooted at `root`).
pub(crate) fn abort_ids(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    rel: Rel,
    root: &str,
) -> Result<Vec<String>, Error> {
    let d = decode_message(release, MessageKind::AbortRequest, frames, limits)?;
    Vec::<String>::from_value(&d.value, None, rel).map_err(|e| e.under(root))
}

/// The request ids of a vLLM ABORT, with [`decode_message`]'s verdict (a
/// type byte other than ABORT, a payload that is no list of strings: a
/// typed error naming the path).
pub fn decode_abort(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Vec<String>, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        abort_ids(release, frames, limits, Rel::of(release)?, "AbortRequest")
    })
}

/// Decodes one message as `M`, with the verdict and drift of
/// [`decode_message`] and the struct of [`decode_typed_via_value`].
/// Unknown fields reported as drift are kept in the structs' `unknown`.
///
/// `EngineCoreRequest` is read by the direct decoder
/// [`crate::hot::decode_request`]: straight from the bytes to the struct,
/// no value tree for the common fields, the verdict, struct and drift of
/// [`decode_typed_via_value`] (held to it by the `hot_request` tests and
/// fuzz target); every other message by [`decode_typed_via_value`].
pub fn decode_typed<M: Message>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| <M as DecodeFrames>::decode_frames(release, frames, limits))
}

/// The reference typed decode: [`decode_message`] (same verdicts, same
/// drift), then the conversion of its value to `M`. Unknown fields
/// reported as drift are kept in the structs' `unknown` (read from a
/// second, schema-less decode of the payload, done only when there is
/// drift), unless one of them holds what a [`Value`] cannot (a `str` of
/// invalid UTF-8, an ext type other than 3: the engine skips unknown
/// fields unread): then none is kept, and the drift is still reported. A
/// message `decode_message` accepts converts: the structs hold every value
/// the wire carries.
pub fn decode_typed_via_value<M: Message>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let rel = Rel::of(release)?;
        let d = decode_message(release, M::KIND, frames, limits)?;
        let raw = if d.drift.is_empty() {
            None
        } else {
            static ANY: Ty = Ty::Any;
            let data = if M::KIND.request_type().is_some() { &frames[1..] } else { frames };
            // The schema-less decode counts one level more than the schema
            // decoder at a tensor (its shape array, which the schema decoder
            // reads as part of the tensor's level): on bytes `decode_message`
            // accepted under `limits`, it gets that level, so that finding the
            // unknown fields never refuses an accepted message.
            let raw_limits = Limits { max_depth: limits.max_depth.saturating_add(1), ..*limits };
            // An unknown field the value tree cannot hold (a string of invalid
            // UTF-8, an ext type other than 3: bytes the schema decoder, like
            // msgspec, skips unread) leaves the unknown fields out; the drift
            // is still reported.
            decode_payload(M::NAME, &ANY, data, &raw_limits).ok().map(|d| d.value)
        };
        let m = M::from_value(&d.value, raw.as_ref(), rel).at(M::NAME)?;
        Ok((m, d.drift))
    })
}
