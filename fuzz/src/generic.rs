//! The generic-decoder oracle: the typed decoder against `rmpv`, a
//! schema-less MessagePack decoder, on the same payload frame.
//!
//! The typed decoder rejects more than a generic one (types, missing
//! fields, enums, validation, limits), so only these directions hold, and
//! only these are asserted:
//!
//! 1. typed **accepts** => `rmpv` reads one complete value that ends exactly
//!    at the end of the payload (no truncation, no reserved byte, no
//!    trailing bytes);
//! 2. `rmpv` fails, or stops before the end => typed **rejects** (any
//!    class: the typed decoder may stop earlier, at a wrong type);
//! 3. typed rejects as **malformed** => `rmpv` fails, or stops before the
//!    end, or a string holds invalid UTF-8 (which `rmpv` keeps as raw bytes
//!    while the typed decoder, like msgspec, refuses it).
//!
//! `rmpv` reads the reserved byte `0xc1` as nil where msgspec (and the
//! typed decoder) reject it, so (3) also allows a `0xc1` at a token
//! position ([`has_reserved_marker`]).
//!
//! `rmpv` is given a depth budget of 4 * `Limits::max_depth` (it spends
//! about two per array or map level; its default of 1024 stops at about 512
//! levels, below the typed decoder's 995): deeper input is a typed `limits`
//! reject, which (1) to (3) allow.

use engine_protocol::{Outcome, RejectClass};
use rmpv::ValueRef;

/// Checks (1) to (3) for one payload and the typed outcome.
pub fn check(payload: &[u8], outcome: &Outcome) {
    let mut rest = payload;
    let budget = 4 * engine_protocol::Limits::default().max_depth;
    let generic = rmpv::decode::read_value_ref_with_max_depth(&mut rest, budget);
    let complete = generic.is_ok() && rest.is_empty();
    match outcome {
        Outcome::Accept { .. } => {
            assert!(
                complete,
                "typed decoder accepts, rmpv does not read one complete value ({:?}, {} bytes left)",
                generic.as_ref().err(),
                rest.len()
            );
        }
        Outcome::Reject(class) => {
            if *class == RejectClass::Malformed {
                let bad_utf8 = generic.as_ref().is_ok_and(has_invalid_utf8);
                assert!(
                    !complete || bad_utf8 || has_reserved_marker(payload),
                    "typed decoder says malformed, rmpv reads one complete value with valid UTF-8 and no 0xc1"
                );
            }
        }
    }
}

fn has_invalid_utf8(v: &ValueRef<'_>) -> bool {
    match v {
        ValueRef::String(s) => s.as_str().is_none(),
        ValueRef::Array(xs) => xs.iter().any(has_invalid_utf8),
        ValueRef::Map(m) => m.iter().any(|(k, x)| has_invalid_utf8(k) || has_invalid_utf8(x)),
        _ => false,
    }
}

/// Whether a `0xc1` marker starts a token of the first value of `buf`
/// (walked with `rmp`'s marker table, independently of the typed decoder's
/// reader).
pub fn has_reserved_marker(buf: &[u8]) -> bool {
    use rmp::Marker as M;
    fn be(buf: &[u8], at: usize, n: usize) -> Option<u64> {
        buf.get(at..at + n).map(|b| b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
    }
    let mut at = 0usize;
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let Some(&b) = buf.get(at) else { return false };
        at += 1;
        // (bytes to skip after the marker, elements that follow)
        let (skip, more): (Option<u64>, u64) = match M::from_u8(b) {
            M::Reserved => return true,
            M::FixPos(_) | M::FixNeg(_) | M::Null | M::True | M::False => (Some(0), 0),
            M::U8 | M::I8 => (Some(1), 0),
            M::U16 | M::I16 => (Some(2), 0),
            M::U32 | M::I32 | M::F32 => (Some(4), 0),
            M::U64 | M::I64 | M::F64 => (Some(8), 0),
            M::FixStr(n) => (Some(u64::from(n)), 0),
            M::Str8 | M::Bin8 => (be(buf, at, 1).map(|n| 1 + n), 0),
            M::Str16 | M::Bin16 => (be(buf, at, 2).map(|n| 2 + n), 0),
            M::Str32 | M::Bin32 => (be(buf, at, 4).map(|n| 4 + n), 0),
            M::FixExt1 => (Some(2), 0),
            M::FixExt2 => (Some(3), 0),
            M::FixExt4 => (Some(5), 0),
            M::FixExt8 => (Some(9), 0),
            M::FixExt16 => (Some(17), 0),
            M::Ext8 => (be(buf, at, 1).map(|n| 2 + n), 0),
            M::Ext16 => (be(buf, at, 2).map(|n| 3 + n), 0),
            M::Ext32 => (be(buf, at, 4).map(|n| 5 + n), 0),
            M::FixArray(n) => (Some(0), u64::from(n)),
            M::FixMap(n) => (Some(0), 2 * u64::from(n)),
            M::Array16 => (Some(2), be(buf, at, 2).unwrap_or(0)),
            M::Array32 => (Some(4), be(buf, at, 4).unwrap_or(0)),
            M::Map16 => (Some(2), 2 * be(buf, at, 2).unwrap_or(0)),
            M::Map32 => (Some(4), 2 * be(buf, at, 4).unwrap_or(0)),
        };
        let Some(skip) = skip else { return false };
        at = at.saturating_add(skip as usize);
        pending += more;
        if at > buf.len() || pending > (buf.len() - at) as u64 {
            return false;
        }
    }
    false
}
