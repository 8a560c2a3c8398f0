//! `conformance bench`: times the codec on any corpus. For every accepted
//! message case, the best-of-repeats time per call to decode its frames and
//! to encode its decoded value, in nanoseconds; for `EngineCoreOutputs`, also
//! the decode of the same frames by the borrowing fast decoder a gateway's
//! output loop uses (`engine_protocol::hot::decode_outputs`: same verdict,
//! typed fields borrowed from the frames); for `EngineCoreRequest` and
//! `EngineCoreOutputs`, also the typed API's encode of the same message
//! straight from its struct (`engine_protocol::typed`), and for
//! `EngineCoreRequest` the typed decode (the direct decoder on frames held
//! as shared buffers, `engine_protocol::hot::decode_request_shared`: bytes
//! straight into the struct, same verdicts as `decode_message`, a 0.34.0
//! prompt array a view of its frame as vLLM's decoder makes it;
//! `typed_value_decode_ns=` is the reference typed path, `decode_message`
//! plus the conversion, for comparison). The typed encode is
//! `encode_shared`: the frames as shared buffers, a prompt array's aux frame
//! the struct's own bytes, as vLLM's encoder hands a numpy array's memory to
//! ZeroMQ. Timing is for comparison on
//! one machine; the criterion benches in `protocol/benches/` are the
//! statistically careful measurement.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::fmt;

use engine_protocol::bytes::Bytes;
use engine_protocol::hot::{decode_outputs, decode_request_shared};
use engine_protocol::typed::{
    decode_typed, decode_typed_via_value, EncodeOptions, EngineCoreOutputs, EngineCoreRequest,
};
use engine_protocol::{decode_message, encode_message, Limits, MessageKind};

use crate::corpus::{Body, Case, Expect};

pub struct BenchLine {
    pub id: String,
    pub decode_ns: u64,
    pub encode_ns: u64,
    /// `EngineCoreOutputs` only: the fast decoder's time.
    pub fast_decode_ns: Option<u64>,
    /// `EngineCoreRequest` only: `decode_typed` into the typed struct (the
    /// direct decoder).
    pub typed_decode_ns: Option<u64>,
    /// `EngineCoreRequest` only: the reference typed path
    /// (`decode_typed_via_value`: `decode_message` plus the conversion).
    pub typed_value_decode_ns: Option<u64>,
    /// `EngineCoreRequest` and `EngineCoreOutputs` (vLLM): the typed
    /// struct's direct encode.
    pub typed_encode_ns: Option<u64>,
}

/// `<case id> decode_ns=<n> encode_ns=<n>[ fast_decode_ns=<n>][ typed_decode_ns=<n>][ typed_value_decode_ns=<n>][ typed_encode_ns=<n>]`.
impl fmt::Display for BenchLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} decode_ns={} encode_ns={}", self.id, self.decode_ns, self.encode_ns)?;
        for (key, v) in [
            ("fast_decode_ns", self.fast_decode_ns),
            ("typed_decode_ns", self.typed_decode_ns),
            ("typed_value_decode_ns", self.typed_value_decode_ns),
            ("typed_encode_ns", self.typed_encode_ns),
        ] {
            if let Some(n) = v {
                write!(f, " {key}={n}")?;
            }
        }
        Ok(())
    }
}

/// Best per-call time of `f` over `repeats` batches of at least `batch` wall
/// time each.
fn best_ns(repeats: usize, batch: Duration, mut f: impl FnMut()) -> u64 {
    // Calibrate the iteration count so one batch takes about `batch`.
    let mut iters: u64 = 1;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed() >= batch || iters >= 1 << 24 {
            break;
        }
        iters *= 2;
    }
    let mut best = u64::MAX;
    for _ in 0..repeats {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        let per = (t.elapsed().as_nanos() / iters as u128) as u64;
        best = best.min(per);
    }
    best
}

/// Times every accepted message case with a schema table; the rest are
/// listed in the second vector with the reason.
pub fn run(cases: &[Case], repeats: usize, batch: Duration) -> (Vec<BenchLine>, Vec<(String, String)>) {
    let limits = Limits::default();
    let mut lines = Vec::new();
    let mut skipped = Vec::new();
    for case in cases {
        let Body::Message { message, frames, expect: Expect::Accept, .. } = &case.body else {
            continue;
        };
        let Some(rel) = case.release() else {
            skipped.push((case.id.clone(), format!("no schema table for {} {}", case.dialect, case.version)));
            continue;
        };
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let decoded = match decode_message(rel, *message, &refs, &limits) {
            Ok(d) => d,
            Err(e) => {
                skipped.push((case.id.clone(), format!("does not decode: {e}")));
                continue;
            }
        };
        let decode_ns = best_ns(repeats, batch, || {
            black_box(decode_message(rel, *message, black_box(&refs), &limits).ok());
        });
        let encode_ns = best_ns(repeats, batch, || {
            black_box(encode_message(rel, *message, black_box(&decoded.value)).ok());
        });
        let fast_decode_ns =
            (*message == MessageKind::EngineCoreOutputs && decode_outputs(rel, &refs, &limits).is_ok()).then(|| {
                best_ns(repeats, batch, || {
                    black_box(decode_outputs(rel, black_box(&refs), &limits).ok());
                })
            });
        let (mut typed_decode_ns, mut typed_value_decode_ns, mut typed_encode_ns) = (None, None, None);
        let options = EncodeOptions::default();
        match message {
            MessageKind::EngineCoreRequest => {
                let shared: Vec<Bytes> = frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
                if let Ok((typed, _)) = decode_request_shared(rel, &shared, &limits) {
                    typed_decode_ns = Some(best_ns(repeats, batch, || {
                        black_box(decode_request_shared(rel, black_box(&shared), &limits).ok());
                    }));
                    typed_value_decode_ns = Some(best_ns(repeats, batch, || {
                        black_box(decode_typed_via_value::<EngineCoreRequest>(rel, black_box(&refs), &limits).ok());
                    }));
                    if typed.encode_shared(rel, &options).is_ok() {
                        typed_encode_ns = Some(best_ns(repeats, batch, || {
                            black_box(black_box(&typed).encode_shared(rel, &options).ok());
                        }));
                    }
                }
            }
            MessageKind::EngineCoreOutputs => {
                if let Ok((typed, _)) = decode_typed::<EngineCoreOutputs>(rel, &refs, &limits) {
                    if typed.encode_shared(rel, &options).is_ok() {
                        typed_encode_ns = Some(best_ns(repeats, batch, || {
                            black_box(black_box(&typed).encode_shared(rel, &options).ok());
                        }));
                    }
                }
            }
            _ => {}
        }
        lines.push(BenchLine {
            id: format!("{}/{}/{}", case.dialect, case.version, case.id),
            decode_ns,
            encode_ns,
            fast_decode_ns,
            typed_decode_ns,
            typed_value_decode_ns,
            typed_encode_ns,
        });
    }
    (lines, skipped)
}
