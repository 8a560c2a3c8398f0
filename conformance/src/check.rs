//! Checking one case against the reference implementation.
//!
//! A `message` case passes when (docs/case-format.md §9.2):
//! 1. decoding its frames gives the engine's verdict: accepted with a view
//!    equal to `value` (and, when the case lists `drift`, exactly that
//!    drift), or rejected with the expected class;
//! 2. for `encode: exact`, encoding `value` reproduces `frames` byte for
//!    byte;
//! 3. decode(encode(value)) gives `value` again.

use engine_protocol::error::Outcome;
use engine_protocol::msgpack::{Reader, Token};
use engine_protocol::schema::{Layout, Ty};
use engine_protocol::view::{diff, from_view, to_view};
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind, ReleaseSchema};
use serde_json::Value as Json;

use crate::corpus::{Body, Case, EncodeMode, Expect};

/// The verdict on one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    /// Not checked, with the reason (a dialect, version or kind this build
    /// declares unsupported). Counted and printed, never silent.
    Skip(String),
}

/// Checks one case.
pub fn check(case: &Case) -> Verdict {
    let Some(rel) = release(&case.dialect, &case.version) else {
        return Verdict::Skip(format!("no schema table for {} {}", case.dialect, case.version));
    };
    match &case.body {
        Body::Message { message, frames, expect, value, encode, drift } => {
            match check_message(rel, *message, frames, expect, value.as_ref(), *encode, drift.as_deref()) {
                Ok(()) => Verdict::Pass,
                Err(e) => Verdict::Fail(e),
            }
        }
        Body::Other { input, expected } => crate::kinds::check(case, input, expected),
        Body::Unsupported(why) => Verdict::Skip(why.clone()),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Where two frame lists first differ.
pub fn frames_diff(expected: &[Vec<u8>], actual: &[Vec<u8>]) -> Option<String> {
    if expected.len() != actual.len() {
        return Some(format!("expected {} frames, encoder wrote {}", expected.len(), actual.len()));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            let at = e.iter().zip(a).position(|(x, y)| x != y).unwrap_or(e.len().min(a.len()));
            let lo = at.saturating_sub(4);
            return Some(format!(
                "frame {i} differs at byte {at} (lengths {} vs {}): expected ..{}.., got ..{}..",
                e.len(),
                a.len(),
                hex(&e[lo..(at + 12).min(e.len())]),
                hex(&a[lo..(at + 12).min(a.len())]),
            ));
        }
    }
    None
}

fn check_message(
    rel: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[Vec<u8>],
    expect: &Expect,
    value: Option<&Json>,
    encode: EncodeMode,
    drift: Option<&[String]>,
) -> Result<(), String> {
    let limits = Limits::default();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let decoded = decode_message(rel, kind, &refs, &limits);
    let decoded = match (expect, decoded) {
        (Expect::Reject(class), Err(e)) if e.class == *class => return Ok(()),
        (Expect::Reject(class), Err(e)) => {
            return Err(format!("expected reject {class}, got reject {} at {}: {}", e.class, e.path, e.detail))
        }
        (Expect::Reject(class), Ok(d)) => {
            return Err(format!("expected reject {class}, got {}", Outcome::Accept { drift: d.drift }.label()))
        }
        (Expect::Accept, Err(e)) => {
            return Err(format!("expected accept, got reject {} at {}: {}", e.class, e.path, e.detail))
        }
        (Expect::Accept, Ok(d)) => d,
    };
    let ty = kind.payload_type(rel);
    let expected_view = value.ok_or("accepted case has no value")?;
    let view = to_view(ty, &decoded.value);
    if let Some((path, what)) = diff(expected_view, &view) {
        return Err(format!("decoded view differs at {}{path}: {what}", kind.name()));
    }
    // A case without `drift` declares none: spurious drift is a failure.
    let mut want = drift.map(<[String]>::to_vec).unwrap_or_default();
    let mut got = decoded.drift.clone();
    want.sort();
    got.sort();
    if want != got {
        return Err(match drift {
            Some(_) => format!("drift differs: expected {want:?}, got {got:?}"),
            None => format!("the case lists no drift, the decoder reported {got:?}"),
        });
    }
    let built = from_view(kind.name(), ty, expected_view).map_err(|e| format!("value does not build: {e}"))?;
    let encoded = encode_message(rel, kind, &built).map_err(|e| format!("encode failed: {e}"))?;
    if encode == EncodeMode::Exact {
        if let Some(d) = frames_diff(frames, &encoded) {
            // Python writes sets in hash-table order, which the value does
            // not carry: compare again with set elements in byte order.
            let payload_at = usize::from(kind.request_type().is_some());
            let same_but_set_order = frames.len() == encoded.len()
                && frames.iter().zip(&encoded).enumerate().all(|(i, (e, a))| {
                    if i == payload_at {
                        sets_sorted(ty, e).is_some_and(|x| Some(x) == sets_sorted(ty, a))
                    } else {
                        e == a
                    }
                });
            if !same_but_set_order {
                return Err(format!("encode not exact: {d}"));
            }
        }
    }
    let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let again =
        decode_message(rel, kind, &refs, &limits).map_err(|e| format!("decode(encode(value)) rejected: {e}"))?;
    if let Some((path, what)) = diff(expected_view, &to_view(ty, &again.value)) {
        return Err(format!("decode(encode(value)) differs at {}{path}: {what}", kind.name()));
    }
    Ok(())
}

/// `payload` with the elements of every set-typed field reordered by their
/// encoded bytes; everything else copied verbatim. `None` if the payload does
/// not parse against `ty`.
pub fn sets_sorted(ty: &'static Ty, payload: &[u8]) -> Option<Vec<u8>> {
    let mut r = Reader::new(payload);
    let mut out = Vec::with_capacity(payload.len());
    canon(ty, payload, &mut r, &mut out)?;
    r.is_empty().then_some(out)
}

fn raw<'a>(buf: &'a [u8], r: &mut Reader) -> Option<&'a [u8]> {
    let at = r.position();
    r.skip_value().ok()?;
    Some(&buf[at..r.position()])
}

fn header(buf: &[u8], r: &mut Reader, out: &mut Vec<u8>) -> Option<Token<'static>> {
    let at = r.position();
    let t = match r.token().ok()? {
        Token::Array(n) => Token::Array(n),
        Token::Map(n) => Token::Map(n),
        Token::Nil => Token::Nil,
        _ => return None,
    };
    out.extend_from_slice(&buf[at..r.position()]);
    Some(t)
}

fn canon(ty: &'static Ty, buf: &[u8], r: &mut Reader, out: &mut Vec<u8>) -> Option<()> {
    match ty {
        Ty::Optional(inner) => {
            if r.peek_byte() == Some(0xc0) {
                copy_raw(buf, r, out)
            } else {
                canon(inner, buf, r, out)
            }
        }
        Ty::Set(_) => {
            let Token::Array(n) = header(buf, r, out)? else { return None };
            let mut items = (0..n).map(|_| raw(buf, r)).collect::<Option<Vec<_>>>()?;
            items.sort();
            items.into_iter().for_each(|i| out.extend_from_slice(i));
            Some(())
        }
        Ty::List(inner) => {
            let Token::Array(n) = header(buf, r, out)? else { return None };
            (0..n).try_for_each(|_| canon(inner, buf, r, out))
        }
        Ty::Struct(s) => match s.layout {
            Layout::Positional | Layout::NamedTuple | Layout::Tuple => {
                let Token::Array(n) = header(buf, r, out)? else { return None };
                (0..n as usize).try_for_each(|i| match s.fields.get(i) {
                    Some(f) => canon(f.ty, buf, r, out),
                    None => {
                        out.extend_from_slice(raw(buf, r)?);
                        Some(())
                    }
                })
            }
            Layout::SparseMap | Layout::FullMap => {
                let Token::Map(n) = header(buf, r, out)? else { return None };
                for _ in 0..n {
                    let key = raw(buf, r)?;
                    out.extend_from_slice(key);
                    let mut kr = Reader::new(key);
                    let field = match kr.token().ok()? {
                        Token::Str(k) => s.fields.iter().find(|f| f.name.as_bytes() == k),
                        _ => None,
                    };
                    match field {
                        Some(f) => canon(f.ty, buf, r, out)?,
                        None => copy_raw(buf, r, out)?,
                    }
                }
                Some(())
            }
            Layout::OpenMap => {
                out.extend_from_slice(raw(buf, r)?);
                Some(())
            }
        },
        _ => {
            out.extend_from_slice(raw(buf, r)?);
            Some(())
        }
    }
}

fn copy_raw(buf: &[u8], r: &mut Reader, out: &mut Vec<u8>) -> Option<()> {
    out.extend_from_slice(raw(buf, r)?);
    Some(())
}
