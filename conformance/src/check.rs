//! Checking one case: the checks of docs/case-format.md §9, written once.
//!
//! A `message` case passes when (docs/case-format.md §9.2):
//! 1. decoding its frames gives the engine's verdict: accepted with a view
//!    equal to `value` and exactly the drift the case lists (none when it
//!    lists none), or rejected with the expected class;
//! 2. encoding `value` is accepted, and for `encode: exact` reproduces
//!    `frames` byte for byte (set elements may be reordered in the payload
//!    frame: Python writes sets in hash order, which the value does not
//!    carry);
//! 3. decode(encode(value)) gives `value` again.
//!
//! [`check_message`] runs these checks against any [`Codec`]: the reference
//! implementation in process ([`check`], the default of `verify`) or an
//! outside testee (docs/testee.md, [`crate::testee`]). The comparisons rely
//! on `engine_protocol::view::diff` for views (§6) and on the schema tables
//! of `engine-protocol` for the set-order allowance.

use engine_protocol::internal::msgpack::{Reader, Token};
use engine_protocol::schema::{Layout, Ty};
use engine_protocol::view::diff;
use engine_protocol::MessageKind;
use engine_protocol::Outcome;
use engine_testkit::hex;
use serde_json::Value as Json;

use crate::codec::{Codec, DecodeAnswer, EncodeAnswer, InProcess, NoAnswer, Target};
use crate::corpus::{Body, Case, EncodeMode, Expect};

/// The verdict on one case: the suite's one outcome classification
/// (`engine_testkit::outcome`). A case passes, fails, or is skipped with the
/// reason (a dialect, version or kind this build declares unsupported, or a
/// request a testee declined), counted and printed, never silent.
pub use engine_testkit::outcome::Verdict;

/// Checks one case against the reference implementation, in process.
pub fn check(case: &Case) -> Verdict {
    if case.release().is_none() {
        return Verdict::Skip(format!("no schema table for {} {}", case.dialect, case.version));
    }
    match &case.body {
        Body::Message { .. } => check_message(&mut InProcess::default(), case),
        Body::Other { input, expected } => crate::kinds::check(case, input, expected),
        Body::Unsupported(why) => Verdict::Skip(why.clone()),
    }
}

/// The case id as reports print it: `<dialect>/<version>/<case id>`.
pub fn report_id(case: &Case) -> String {
    case.report_id()
}

/// Runs the checks of a `message` case (docs/case-format.md §9.2) with the
/// results `codec` gives. A case of another kind is skipped.
pub fn check_message(codec: &mut dyn Codec, case: &Case) -> Verdict {
    let Body::Message { message, frames, expect, value, encode, drift } = &case.body else {
        return Verdict::Skip(format!("kind `{}` is not a message case", case.kind));
    };
    let id = report_id(case);
    let target = Target { case: &id, dialect: &case.dialect, version: &case.version, message: *message };
    let parts = MessageParts { frames, expect, value: value.as_ref(), encode: *encode, drift: drift.as_deref() };
    match message_checks(codec, &target, &parts) {
        Ok(None) => Verdict::Pass,
        Ok(Some(skipped)) => Verdict::Skip(skipped),
        Err(Stop::Fail(why)) => Verdict::Fail(why),
        Err(Stop::Skip(why)) => Verdict::Skip(why),
    }
}

struct MessageParts<'a> {
    frames: &'a [Vec<u8>],
    expect: &'a Expect,
    value: Option<&'a Json>,
    encode: EncodeMode,
    drift: Option<&'a [String]>,
}

/// Why the checks of a case stopped early.
enum Stop {
    Fail(String),
    /// The codec skipped a request whose answer the next check needs.
    Skip(String),
}

impl From<NoAnswer> for Stop {
    fn from(e: NoAnswer) -> Self {
        match e {
            NoAnswer::Skipped(why) => Stop::Skip(why),
            NoAnswer::Failed(why) => Stop::Fail(why),
        }
    }
}

impl From<String> for Stop {
    fn from(why: String) -> Self {
        Stop::Fail(why)
    }
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
                hex::encode(&e[lo..(at + 12).min(e.len())]),
                hex::encode(&a[lo..(at + 12).min(a.len())]),
            ));
        }
    }
    None
}

/// `expected` and `actual` are the same frames but for the order of set
/// elements in the payload frame (docs/case-format.md §9.2 item 3). Needs the
/// schema of `dialect`/`version`; false without one.
pub fn same_but_set_order(target: &Target, expected: &[Vec<u8>], actual: &[Vec<u8>]) -> bool {
    let Some(rel) = target.release() else { return false };
    let ty = target.message.payload_type(rel);
    let payload_at = usize::from(target.message.request_type().is_some());
    expected.len() == actual.len()
        && expected.iter().zip(actual).enumerate().all(|(i, (e, a))| {
            if i == payload_at {
                sets_sorted(ty, e).is_some_and(|x| Some(x) == sets_sorted(ty, a))
            } else {
                e == a
            }
        })
}

fn with_detail(class: impl std::fmt::Display, detail: &str) -> String {
    if detail.is_empty() {
        format!("reject {class}")
    } else {
        format!("reject {class}: {detail}")
    }
}

/// A decode answer with another verdict (or reject class) than the case's.
#[derive(Debug, thiserror::Error)]
#[error("expected {expected}, got {got}")]
struct WrongVerdict {
    expected: Expect,
    /// The answer's verdict as failures print it (`reject type: detail`).
    got: String,
}

impl From<WrongVerdict> for Stop {
    fn from(e: WrongVerdict) -> Self {
        Stop::Fail(e.to_string())
    }
}

/// The view and drift of a decode answer that accepts as the case expects;
/// otherwise the failure (a wrong verdict or class).
fn accepted(answer: DecodeAnswer, expect: &Expect) -> Result<(Json, Vec<String>), WrongVerdict> {
    let got = match (expect, answer) {
        (Expect::Accept, DecodeAnswer::Accept { view, drift }) => return Ok((view, drift)),
        (Expect::Accept, DecodeAnswer::Reject { class, detail }) => with_detail(class, &detail),
        (Expect::Reject(_), DecodeAnswer::Accept { drift, .. }) => Outcome::Accept { drift }.label(),
        (Expect::Reject(_), DecodeAnswer::Reject { class: got, detail }) => with_detail(got, &detail),
    };
    Err(WrongVerdict { expected: expect.clone(), got })
}

/// The checks in order; `Ok(Some(reason))` when none failed but the codec
/// skipped a request (a decoder without an encoder).
fn message_checks(codec: &mut dyn Codec, target: &Target, case: &MessageParts) -> Result<Option<String>, Stop> {
    let kind: MessageKind = target.message;
    // 1. The verdict, the view, the drift.
    let answer = codec.decode(target, case.frames)?;
    if let (Expect::Reject(class), DecodeAnswer::Reject { class: got, .. }) = (case.expect, &answer) {
        if class == got {
            return Ok(None);
        }
    }
    let (view, got_drift) = accepted(answer, case.expect)?;
    let expected_view = case.value.ok_or("accepted case has no value".to_string())?;
    if let Some((path, what)) = diff(expected_view, &view) {
        return Err(format!("decoded view differs at {}{path}: {what}", kind.name()).into());
    }
    // A case without `drift` declares none: spurious drift is a failure.
    let mut want = case.drift.map(<[String]>::to_vec).unwrap_or_default();
    let mut got = got_drift;
    want.sort();
    got.sort();
    if want != got {
        return Err(match case.drift {
            Some(_) => format!("drift differs: expected {want:?}, got {got:?}"),
            None => format!("the case lists no drift, the decoder reported {got:?}"),
        }
        .into());
    }
    // 2. The value encodes, exactly where the case says so.
    let encoded = match codec.encode(target, expected_view) {
        Ok(EncodeAnswer::Frames(frames)) => frames,
        Ok(EncodeAnswer::Reject { class, detail }) => {
            return Err(format!("encode refused the value: {}", with_detail(class, &detail)).into())
        }
        // A codec without an encoder: the decode checks above stand, the
        // case as a whole is not checked.
        Err(NoAnswer::Skipped(why)) => return Ok(Some(why)),
        Err(e) => return Err(e.into()),
    };
    if case.encode == EncodeMode::Exact {
        if let Some(d) = frames_diff(case.frames, &encoded) {
            if !same_but_set_order(target, case.frames, &encoded) {
                return Err(format!("encode not exact: {d}").into());
            }
        }
    }
    // 3. decode(encode(value)) == value.
    match codec.decode(target, &encoded)? {
        DecodeAnswer::Accept { view, .. } => {
            if let Some((path, what)) = diff(expected_view, &view) {
                return Err(format!("decode(encode(value)) differs at {}{path}: {what}", kind.name()).into());
            }
        }
        DecodeAnswer::Reject { class, detail } => {
            return Err(format!("decode(encode(value)) rejected: {}", with_detail(class, &detail)).into())
        }
    }
    Ok(None)
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
                // A tagged struct's tag (element 0) is not a field.
                let skip = usize::from(s.tag().is_some());
                (0..n as usize).try_for_each(|i| match i.checked_sub(skip).and_then(|i| s.fields.get(i)) {
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
