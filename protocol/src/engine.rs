//! One engine's codec: the release a gateway learns from the engine's
//! registration ([`Registration`]), and the calls that speak that release
//! ([`EngineCodec`]), so that the same gateway code serves engines of every
//! release the typed API covers.
//!
//! Wire facts (docs/wire-protocol.md §4.4, §6.9, §11): an engine's first
//! message on each input socket is its registration, an
//! `EngineCoreReadyResponse` dataclass written as a map of every field: 25
//! keys in 0.32.0, 28 in 0.33.0, 33 in 0.34.0, `vllm_version` among them
//! (vLLM's `__version__`: `0.34.0`, or `0.34.1.dev3+g1a2b3c4` for a build
//! from source, `0.33.0+cu129` with a local tag). Releases append fields
//! and, in 0.34.0, retype the prompt from a list of ints to an int32
//! ndarray that a 0.34.0 engine's decoder requires: a gateway must encode
//! for the engine's release, which its registration says.
//!
//! Which release a registration is ([`Registration::read`]):
//!
//! 1. the release whose version is the engine's `vllm_version` without its
//!    local tag and pre/dev suffix (`0.34.0+cu129`, `0.34.0rc1` are
//!    0.34.0), when the typed API covers it and its table reads the
//!    registration without drift ([`ReleaseMatch::Version`]);
//! 2. otherwise (a patch or a build the crate has no table for, or an
//!    engine whose fields disagree with its version) the newest covered
//!    release whose registration has exactly the keys sent
//!    ([`ReleaseMatch::Shape`]): a patch release keeps its minor's wire;
//! 3. otherwise an error (`validation`, at `EngineCoreReadyResponse`)
//!    naming the version, the keys no covered release has, and the
//!    releases covered.

use bytes::Bytes;

use crate::decode::{decode_payload, Limits};
use crate::error::{Error, RejectClass};
use crate::frames::RequestType;
use crate::hot::{decode_outputs, Outputs};
use crate::schema::{ReleaseSchema, Ty, VLLM_RELEASES};
use crate::typed::{decode_typed, EncodeOptions, EngineCoreReadyResponse, EngineCoreRequest};
use crate::value::Value;

/// How a registration's release was found (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseMatch {
    /// The engine's `vllm_version` is the release's, and the release's
    /// table reads the registration without drift.
    Version,
    /// The version has no table here (or disagrees with the keys sent):
    /// the newest release whose registration has exactly these keys.
    Shape,
}

/// An engine's registration, read: the release to speak to it, and the
/// registration decoded with that release's table.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The release's table (one of [`VLLM_RELEASES`]).
    pub release: &'static ReleaseSchema,
    /// `vllm_version` as the engine sent it.
    pub vllm_version: String,
    /// How the release was found.
    pub matched: ReleaseMatch,
    /// The registration, decoded with the release's table.
    pub ready: EngineCoreReadyResponse,
}

/// A version string's release part: the leading `X.Y.Z`, without a local
/// tag (`+cu129`) or a pre-release, post-release or dev suffix.
fn release_part(v: &str) -> &str {
    let v = v.split('+').next().unwrap_or(v);
    let mut dots = 0;
    let mut end = 0;
    for (i, c) in v.char_indices() {
        match c {
            '0'..='9' => end = i + 1,
            '.' if dots < 2 => dots += 1,
            _ => break,
        }
    }
    &v[..end]
}

impl Registration {
    /// Reads an engine's registration payload (the first message on an
    /// input socket: its one frame) under the default [`Limits`].
    ///
    /// ```
    /// use engine_protocol::typed::EngineCoreReadyResponse;
    /// use engine_protocol::{Registration, ReleaseMatch, VLLM_0_33_0, VLLM_0_34_0};
    ///
    /// // What a 0.34.0 engine sends (here built with the typed API).
    /// let ready = EngineCoreReadyResponse { vllm_version: "0.34.0".into(), max_model_len: 4096, ..Default::default() };
    /// let payload = ready.encode(VLLM_0_34_0)?.remove(0);
    /// let reg = Registration::read(&payload)?;
    /// assert!(std::ptr::eq(reg.release, VLLM_0_34_0));
    /// assert_eq!(reg.matched, ReleaseMatch::Version);
    /// assert_eq!(reg.ready.max_model_len, 4096);
    ///
    /// // A build the crate has no table for speaks the wire of the release
    /// // with its fields: a 0.33.0-shaped registration is 0.33.0.
    /// let dev = EngineCoreReadyResponse { vllm_version: "0.33.1.dev7+gabc1234".into(), ..Default::default() };
    /// let reg = Registration::read(&dev.encode(VLLM_0_33_0)?.remove(0))?;
    /// assert!(std::ptr::eq(reg.release, VLLM_0_33_0));
    /// assert_eq!(reg.matched, ReleaseMatch::Shape);
    /// # Ok::<(), engine_protocol::Error>(())
    /// ```
    pub fn read(payload: &[u8]) -> Result<Registration, Error> {
        Registration::read_with(payload, &Limits::default())
    }

    /// [`Registration::read`] under `limits`.
    pub fn read_with(payload: &[u8], limits: &Limits) -> Result<Registration, Error> {
        const ROOT: &str = "EngineCoreReadyResponse";
        static ANY: Ty = Ty::Any;
        let raw = decode_payload(ROOT, &ANY, &[payload], limits)?.value;
        let Value::Map(entries) = &raw else {
            return Err(Error::new(RejectClass::Type, ROOT, format!("expected a map, got {}", raw.kind_name())));
        };
        let mut keys: Vec<&str> = Vec::with_capacity(entries.len());
        let mut version = None;
        for (k, v) in entries {
            let Value::Str(k) = k else {
                return Err(Error::new(RejectClass::Type, ROOT, format!("a key of type {}", k.kind_name())));
            };
            if k == "vllm_version" {
                match v {
                    Value::Str(s) => version = Some(s.clone()),
                    other => {
                        return Err(Error::new(
                            RejectClass::Type,
                            format!("{ROOT}.vllm_version"),
                            format!("expected str, got {}", other.kind_name()),
                        ))
                    }
                }
            }
            keys.push(k);
        }
        let version = version.ok_or_else(|| {
            Error::new(RejectClass::MissingField, format!("{ROOT}.vllm_version"), "required field is absent")
        })?;
        let decode =
            |release: &'static ReleaseSchema| decode_typed::<EngineCoreReadyResponse>(release, &[payload], limits);
        let wanted = release_part(&version);
        if let Some(&release) = VLLM_RELEASES.iter().find(|r| r.version == wanted) {
            if let Ok((ready, drift)) = decode(release) {
                if drift.is_empty() {
                    return Ok(Registration { release, vllm_version: version, matched: ReleaseMatch::Version, ready });
                }
            }
        }
        keys.sort_unstable();
        for &release in VLLM_RELEASES.iter().rev() {
            if ready_keys(release) == keys {
                let (ready, _) = decode(release)?;
                return Ok(Registration { release, vllm_version: version, matched: ReleaseMatch::Shape, ready });
            }
        }
        let covered: Vec<&str> = VLLM_RELEASES.iter().map(|r| r.version).collect();
        Err(Error::new(
            RejectClass::Validation,
            ROOT,
            format!(
                "a registration of vLLM {version} with keys {keys:?}: no release this crate's typed API covers \
                 ({}) has that version or those keys",
                covered.join(", ")
            ),
        ))
    }
}

/// The keys of a release's registration, sorted.
fn ready_keys(release: &'static ReleaseSchema) -> Vec<&'static str> {
    let mut keys: Vec<&str> =
        release.ready_response.as_struct().map(|s| s.fields.iter().map(|f| f.name).collect()).unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// The codec of one engine: its release (from its registration) and how
/// to write for it. Encoding and decoding go through the typed API and the
/// fast decoders, for whichever release the engine registered as.
///
/// ```
/// use engine_protocol::typed::{EngineCoreReadyResponse, EngineCoreRequest, Eos};
/// use engine_protocol::{EngineCodec, VLLM_0_33_0, VLLM_0_34_0};
///
/// // The same request, sent to a 0.33.0 engine and to a 0.34.0 engine.
/// let request = EngineCoreRequest::builder("req-1", vec![1_i32, 450, 7483], 16, Eos::token(2)).build()?;
/// let prompts: [(_, &[u8]); 2] = [
///     // A list of three ints.
///     (VLLM_0_33_0, &[0x93, 0x01, 0xcd, 0x01, 0xc2]),
///     // The `[dtype, shape, data]` triple of an int32 array.
///     (VLLM_0_34_0, &[0x93, 0xa3, b'<', b'i', b'4', 0x91, 0x03]),
/// ];
/// for (release, prompt) in prompts {
///     let registration = EngineCoreReadyResponse { vllm_version: release.version.into(), ..Default::default() };
///     let codec = EngineCodec::from_registration(&registration.encode(release)?[0])?;
///     assert!(std::ptr::eq(codec.release(), release));
///     let frames = codec.encode_request(&request)?;
///     assert_eq!(&frames[0][..], &[0x00]); // ADD
///     // After the array header (3 bytes) and the request id (6): the prompt.
///     assert_eq!(&frames[1][9..9 + prompt.len()], prompt);
/// }
/// # Ok::<(), engine_protocol::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct EngineCodec {
    release: &'static ReleaseSchema,
    options: EncodeOptions,
    limits: Limits,
}

impl EngineCodec {
    /// The codec of an engine of `release`: an error (`validation`) for a
    /// release the typed API does not cover (one of [`VLLM_RELEASES`]).
    pub fn new(release: &'static ReleaseSchema) -> Result<EngineCodec, Error> {
        crate::typed::wire::Rel::of(release)?;
        Ok(EngineCodec { release, options: EncodeOptions::default(), limits: Limits::default() })
    }

    /// The codec of the engine that sent this registration payload
    /// ([`Registration::read`]).
    pub fn from_registration(payload: &[u8]) -> Result<EngineCodec, Error> {
        EngineCodec::new(Registration::read(payload)?.release)
    }

    /// With the encoder options of the engine's environment (its
    /// `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`).
    pub fn with_options(mut self, options: EncodeOptions) -> EngineCodec {
        self.options = options;
        self
    }

    /// With other decoder limits.
    pub fn with_limits(mut self, limits: Limits) -> EngineCodec {
        self.limits = limits;
        self
    }

    /// The engine's release.
    pub fn release(&self) -> &'static ReleaseSchema {
        self.release
    }

    /// The frames of an ADD of `request` for the engine's release, in one
    /// call: `[0x00, payload, aux...]`, checked as
    /// [`EngineCoreRequest::encode_checked`] checks (nothing the engine
    /// refuses or fails is written), a long prompt's array shared with the
    /// request as its aux frame (0.34.0 on), not copied.
    pub fn encode_request(&self, request: &EngineCoreRequest) -> Result<Vec<Bytes>, Error> {
        request.encode_checked_shared(self.release, &self.options)
    }

    /// The frames of an ABORT of `request_ids` (the same in every release).
    pub fn encode_abort<S: AsRef<str>>(&self, request_ids: &[S]) -> Vec<Bytes> {
        let mut frames = crate::typed::encode_abort(request_ids);
        let payload = frames.pop().unwrap_or_default();
        vec![Bytes::from_static(RequestType::Abort.frame()), Bytes::from(payload)]
    }

    /// One `EngineCoreOutputs` batch of the engine's release, read by the
    /// fast decoder ([`decode_outputs`]).
    pub fn decode_outputs<'a>(&self, frames: &'a [impl AsRef<[u8]>]) -> Result<Outputs<'a>, Error> {
        decode_outputs(self.release, frames, &self.limits)
    }

    /// An ADD of the engine's release as the engine reads it (for mock
    /// engines and recorders), a 0.34.0 prompt array a view of its frame
    /// ([`crate::hot::decode_request_shared`]).
    pub fn decode_request(&self, frames: &[Bytes]) -> Result<(EngineCoreRequest, Vec<String>), Error> {
        crate::hot::decode_request_shared(self.release, frames, &self.limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_s_release_part_drops_local_tags_and_suffixes() {
        for (v, want) in [
            ("0.34.0", "0.34.0"),
            ("0.34.0+cu129", "0.34.0"),
            ("0.34.1.dev3+g1a2b3c4", "0.34.1"),
            ("0.34.0rc1", "0.34.0"),
            ("0.34.0.post1", "0.34.0"),
            ("1.0", "1.0"),
            ("dev", ""),
        ] {
            assert_eq!(release_part(v), want, "{v}");
        }
    }

    #[test]
    fn every_covered_release_has_a_registration_of_its_own_shape() {
        let shapes: Vec<Vec<&str>> = VLLM_RELEASES.iter().map(|r| ready_keys(r)).collect();
        for (i, a) in shapes.iter().enumerate() {
            for b in &shapes[i + 1..] {
                assert_ne!(a, b, "two covered releases share a registration shape: a shape match would be ambiguous");
            }
        }
    }
}
