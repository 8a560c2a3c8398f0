//! The structure-aware target: valid messages generated from the schema
//! tables (`engine_protocol::internal::arbitrary`), encoded, and decoded back.
//!
//! For a generated value `v` of a message kind and release:
//! - `encode(v)` succeeds;
//! - the decoder accepts it, with no drift, through every check of
//!   [`crate::oracle::message`] (and the `rmpv` and allocation probes);
//! - `decode(encode(v))` is `v` exactly (floats by bits) and has the same
//!   canonical view;
//! - `encode(decode(encode(v)))` is `encode(v)`, byte for byte.

use arbitrary::{Arbitrary, Unstructured};
use engine_protocol::internal::arbitrary::GeneratedMessage;
use engine_protocol::view::{diff, to_view};
use engine_protocol::{decode_message, encode_message, Limits, Outcome};

use crate::oracle::{message, same_value};
use crate::Full;

/// Generates one message from `data` and checks its roundtrip; inputs the
/// generator cannot use are skipped.
pub fn check(data: &[u8]) {
    let Ok(g) = GeneratedMessage::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let (release, kind) = (g.release, g.kind);
    let what = || format!("{} {}: {:?}", release.version, kind.name(), g.value);
    let frames = encode_message(release, kind, &g.value)
        .unwrap_or_else(|e| panic!("a generated value does not encode: {e}\n{}", what()));
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let (outcome, decoded) = message(&mut Full, release, kind, &refs);
    let Some(decoded) = decoded else {
        let e = decode_message(release, kind, &refs, &Limits::default()).unwrap_err();
        panic!("a generated value is rejected: {e}\n{}", what());
    };
    assert_eq!(outcome, Outcome::Accept { drift: Vec::new() }, "{}", what());
    if let Some(at) = same_value(&g.value, &decoded) {
        panic!("decode(encode(v)) differs from v at {at}\n{}\ndecoded {decoded:?}", what());
    }
    let ty = kind.payload_type(release);
    if let Some((path, d)) = diff(&to_view(ty, &g.value), &to_view(ty, &decoded)) {
        panic!("decode(encode(v)) has another view at {path}: {d}\n{}", what());
    }
    let again = encode_message(release, kind, &decoded).expect("re-encode");
    assert!(again == frames, "encode(decode(encode(v))) differs from encode(v)\n{}", what());
}
