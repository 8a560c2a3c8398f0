//! Content rewrites: the fault wire's planted bugs (docs/planted-bugs.md).
//!
//! A rewrite decodes a message with the release's table, changes one field
//! of it and encodes it again, so that what arrives is a well-formed message
//! a buggy gateway (or engine) could have sent: an ADD with a field dropped
//! or set to another value, an output with another finish reason, logprob
//! rows in another order.
//!
//! Wire facts relied on (docs/wire-protocol.md, vLLM 0.32.0
//! `vllm/v1/engine/__init__.py`):
//!
//! - `EngineCoreRequest`, its `SamplingParams` and `EngineCoreOutput` are
//!   msgspec `array_like` structs: every field is written in order, so a
//!   field a sender leaves out reads as its default. "Dropped" is therefore
//!   [`Replacement::Default`], the table's default.
//! - `LogprobsLists` is a named tuple of numpy arrays, one row per
//!   position: the sampled token first, then the top-k alternatives.
//!
//! A path names fields from the message's root struct, `.`-separated;
//! `*` stands for every element of a list (`outputs.*.finish_reason`).

use engine_protocol::schema::{Field, Ty};
use engine_protocol::{StructValue, Tensor, Value};
use serde::{Deserialize, Serialize};

/// What a rewrite puts in the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replacement {
    /// The field's default in the release's table: what arrives when a
    /// sender drops it.
    Default,
    /// Another valid value of the field's type ([`other_value`]).
    Other,
    /// The last two entries of every row of the field's two-dimensional
    /// arrays swapped, in rows of four entries or more: a logprob row's
    /// last two alternatives in the other order. (Entry 0 is the sampled
    /// token, and vLLM's frontend lists the sampled token first whatever
    /// its rank (vLLM 0.32.0 `vllm/logprobs.py`,
    /// `append_logprobs_for_next_position`), so when it is also the top alternative, as under greedy
    /// sampling, a swap of entries 1 and 2 shows nowhere; a row of three
    /// alternatives is the least that shows a swap.)
    SwapLastTwo,
}

impl Replacement {
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Default => "default",
            Replacement::Other => "other",
            Replacement::SwapLastTwo => "swap-last-two",
        }
    }
}

/// One field of a message, set to a replacement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rewrite {
    /// From the message's root struct (`sampling_params.stop`,
    /// `outputs.*.finish_reason`).
    pub path: String,
    pub to: Replacement,
}

/// Why a rewrite could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    #[error("{path}: {at} is not a struct")]
    NotAStruct { path: String, at: String },
    #[error("{path}: {at} is not a list")]
    NotAList { path: String, at: String },
    #[error("{path}: {struct_name} has no field {field}")]
    NoField { path: String, struct_name: &'static str, field: String },
    #[error("empty path")]
    Empty,
}

/// Applies `rw` to `root` (a decoded message of type `ty`); returns how
/// many places it changed (0: the field already held the replacement, or
/// no value of that kind can be made).
pub fn apply(root: &mut Value, ty: &Ty, rw: &Rewrite) -> Result<usize, RewriteError> {
    let parts: Vec<&str> = rw.path.split('.').collect();
    if rw.path.is_empty() {
        return Err(RewriteError::Empty);
    }
    walk(root, ty, &parts, 0, rw)
}

fn walk(v: &mut Value, ty: &Ty, parts: &[&str], depth: usize, rw: &Rewrite) -> Result<usize, RewriteError> {
    let at = || parts[..depth].join(".");
    let ty = strip_optional(ty);
    let Some(&part) = parts.get(depth) else { return Ok(0) };
    if part == "*" {
        let elem = match ty {
            Ty::List(t) | Ty::Set(t) => *t,
            _ => &Ty::Any,
        };
        return match v {
            Value::Nil => Ok(0),
            Value::Array(xs) => {
                let mut n = 0;
                for x in xs {
                    n += walk(x, elem, parts, depth + 1, rw)?;
                }
                Ok(n)
            }
            _ => Err(RewriteError::NotAList { path: rw.path.clone(), at: at() }),
        };
    }
    let s: &mut StructValue = match v {
        Value::Nil => return Ok(0),
        Value::Struct(s) => s,
        _ => return Err(RewriteError::NotAStruct { path: rw.path.clone(), at: at() }),
    };
    let Some(i) = s.schema.index_of(part) else {
        return Err(RewriteError::NoField { path: rw.path.clone(), struct_name: s.schema.name, field: part.into() });
    };
    let field = &s.schema.fields[i];
    if depth + 1 < parts.len() {
        if matches!(s.field(i), Value::Nil) {
            return Ok(0);
        }
        return walk(s.field_mut(i), field.ty, parts, depth + 1, rw);
    }
    let default = &s.schema.default_values()[i];
    match replaced(s.field(i), field, default, rw.to) {
        Some(new) if &new != s.field(i) => {
            *s.field_mut(i) = new;
            Ok(1)
        }
        _ => Ok(0),
    }
}

fn strip_optional(ty: &Ty) -> &Ty {
    match ty {
        Ty::Optional(t) => strip_optional(t),
        t => t,
    }
}

/// The value `cur` of `field` becomes under `to`; `None` when none can be
/// made (a required field has no default; a struct has no generic other).
pub fn replaced(cur: &Value, field: &Field, default: &Value, to: Replacement) -> Option<Value> {
    match to {
        Replacement::Default => (field.default != engine_protocol::schema::Default::Required).then(|| default.clone()),
        Replacement::Other => other_value(field.ty, cur),
        Replacement::SwapLastTwo => swap_last_two(cur),
    }
}

/// A valid value of `ty` other than `cur`: a bool flipped, an int plus
/// one, a float halved (0.5 for zero), a string with `x` appended, the next
/// member of an enum or literal, a list without its last element (one
/// element when empty; a token list with its last id plus one), a map
/// emptied (one entry when empty), a struct with its first field that has
/// an other value changed, and for an optional field left `None` a value
/// of its type (a struct: its defaults, each required field given a
/// value). `None` for tensors and `Any` that is not a map: no generic
/// other value. A union takes its first member that has an other value
/// for `cur`.
pub fn other_value(ty: &Ty, cur: &Value) -> Option<Value> {
    match (ty, cur) {
        (Ty::Optional(t), Value::Nil) => sample(t),
        (Ty::Optional(t), v) => other_value(t, v),
        (Ty::Bool, Value::Bool(b)) => Some(Value::Bool(!b)),
        (Ty::Int, Value::Int(i)) => Some(Value::Int(i.saturating_add(1))),
        (Ty::Int, Value::UInt(_)) => Some(Value::Int(1)),
        (Ty::Float, Value::Float(f)) => Some(Value::Float(if *f == 0.0 { 0.5 } else { f / 2.0 })),
        (Ty::Float, Value::Int(i)) => Some(Value::Float(if *i == 0 { 0.5 } else { *i as f64 / 2.0 })),
        (Ty::Str, Value::Str(s)) => Some(Value::Str(format!("{s}x"))),
        (Ty::Bytes, Value::Bytes(b)) => Some(Value::Bytes([b.as_slice(), b"x"].concat())),
        (Ty::IntEnum(e), Value::Int(i)) => e.values.iter().map(|(v, _)| *v).find(|v| v != i).map(Value::Int),
        (Ty::StrLiteral(opts), Value::Str(s)) => opts.iter().find(|o| **o != s).map(|o| Value::Str((*o).into())),
        (Ty::List(t) | Ty::Set(t), Value::IntArray(xs)) => match xs.split_last() {
            Some((last, rest)) => Some(Value::IntArray([rest, &[last.saturating_add(1)]].concat())),
            None => sample(t).map(|x| Value::Array(vec![x])),
        },
        (Ty::List(t) | Ty::Set(t), Value::Array(xs)) => match xs.split_last() {
            Some((_, rest)) => Some(Value::Array(rest.to_vec())),
            None => sample(t).map(|x| Value::Array(vec![x])),
        },
        (Ty::List(t) | Ty::Set(t), Value::Nil) => sample(t).map(|x| Value::Array(vec![x])),
        (Ty::Union(variants), v) => variants.iter().find_map(|t| other_value(t, v)),
        (Ty::Struct(_), Value::Struct(sv)) => (0..sv.schema.fields.len()).find_map(|i| {
            let new = other_value(sv.schema.fields[i].ty, sv.field(i))?;
            let mut out = sv.clone();
            *out.field_mut(i) = new;
            Some(Value::Struct(out))
        }),
        (Ty::Dict(..) | Ty::Any, Value::Map(m)) if !m.is_empty() => Some(Value::Map(Vec::new())),
        (Ty::Dict(k, v), Value::Map(_) | Value::Nil) => Some(Value::Map(vec![(sample(k)?, sample(v)?)])),
        _ => None,
    }
}

/// A value of `ty` where there was none.
fn sample(ty: &Ty) -> Option<Value> {
    Some(match ty {
        Ty::Optional(t) => return sample(t),
        Ty::Bool => Value::Bool(true),
        Ty::Int => Value::Int(1),
        Ty::Float => Value::Float(0.5),
        Ty::Str => Value::Str("x".into()),
        Ty::Bytes => Value::Bytes(b"x".to_vec()),
        Ty::IntEnum(e) => Value::Int(e.values.first()?.0),
        Ty::StrLiteral(opts) => Value::Str((*opts.first()?).into()),
        Ty::List(t) | Ty::Set(t) => Value::Array(vec![sample(t)?]),
        Ty::Dict(k, v) => Value::Map(vec![(sample(k)?, sample(v)?)]),
        Ty::Union(variants) => return variants.iter().find_map(sample),
        Ty::Struct(s) => {
            let mut v = StructValue::with_defaults(s);
            for (i, f) in s.fields.iter().enumerate() {
                if f.default == engine_protocol::schema::Default::Required {
                    *v.field_mut(i) = sample(f.ty)?;
                }
            }
            Value::Struct(v)
        }
        _ => return None,
    })
}

/// `cur` (a tensor, or a struct of tensors such as `LogprobsLists`) with
/// the last two entries of every row of each two-dimensional array of
/// four columns or more swapped; `None` when there is none or the swap
/// changes nothing.
pub fn swap_last_two(cur: &Value) -> Option<Value> {
    match cur {
        Value::Tensor(t) => swap_columns(t).map(|t| Value::Tensor(Box::new(t))),
        Value::Struct(s) => {
            let mut out = s.clone();
            let mut any = false;
            for i in 0..s.schema.fields.len() {
                if let Value::Tensor(t) = s.field(i) {
                    if let Some(t) = swap_columns(t) {
                        *out.field_mut(i) = Value::Tensor(Box::new(t));
                        any = true;
                    }
                }
            }
            any.then_some(Value::Struct(out))
        }
        _ => None,
    }
}

fn swap_columns(t: &Tensor) -> Option<Tensor> {
    let [rows, cols] = t.shape[..] else { return None };
    let size = t.parsed_dtype()?.elem.size();
    let (rows, cols) = (usize::try_from(rows).ok()?, usize::try_from(cols).ok()?);
    if cols < 4 || t.data.len() != rows.checked_mul(cols)?.checked_mul(size)? {
        return None;
    }
    let mut out = t.clone();
    for r in 0..rows {
        let a = (r * cols + cols - 2) * size;
        let (x, y) = out.data[a..a + 2 * size].split_at_mut(size);
        x.swap_with_slice(y);
    }
    (out.data != t.data).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine_protocol::Numbers;
    use engine_protocol::{decode_message, encode_message, Limits, MessageKind, VLLM_0_32_0};

    fn add() -> Value {
        let r = VLLM_0_32_0;
        let mut sp = engine_protocol::internal::sampling_params_value(r);
        sp.set("stop", Value::Array(vec![Value::Str("a".into()), Value::Str("b".into())]));
        sp.set("temperature", Value::Float(0.8));
        engine_protocol::internal::engine_core_request_value(r, "r1", vec![5, 6, 7], sp, 0.0)
    }

    fn sp_field(v: &Value, name: &str) -> Value {
        let Value::Struct(s) = v else { panic!() };
        s.struct_field("sampling_params").unwrap().get(name).unwrap().clone()
    }

    fn rewrite(path: &str, to: Replacement) -> Rewrite {
        Rewrite { path: path.into(), to }
    }

    #[test]
    fn a_dropped_field_reads_as_its_default_and_survives_the_wire() {
        let r = VLLM_0_32_0;
        let mut v = add();
        assert_eq!(
            apply(&mut v, r.engine_core_request, &rewrite("sampling_params.temperature", Replacement::Default)),
            Ok(1)
        );
        let frames = encode_message(r, MessageKind::EngineCoreRequest, &v).unwrap();
        let back = decode_message(r, MessageKind::EngineCoreRequest, &frames, &Limits::default()).unwrap().value;
        assert_eq!(sp_field(&back, "temperature"), Value::Float(1.0));
        // Already the default: nothing to change.
        assert_eq!(
            apply(&mut v, r.engine_core_request, &rewrite("sampling_params.temperature", Replacement::Default)),
            Ok(0)
        );
    }

    #[test]
    fn another_value_removes_a_stop_string_halves_a_float_and_flips_a_bool() {
        let r = VLLM_0_32_0;
        let mut v = add();
        for f in ["stop", "temperature", "ignore_eos", "seed", "max_tokens"] {
            assert_eq!(
                apply(&mut v, r.engine_core_request, &rewrite(&format!("sampling_params.{f}"), Replacement::Other)),
                Ok(1),
                "{f}"
            );
        }
        assert_eq!(sp_field(&v, "stop"), Value::Array(vec![Value::Str("a".into())]));
        assert_eq!(sp_field(&v, "temperature"), Value::Float(0.4));
        assert_eq!(sp_field(&v, "ignore_eos"), Value::Bool(true));
        assert_eq!(sp_field(&v, "seed"), Value::Int(1));
    }

    #[test]
    fn another_struct_changes_its_first_field_that_can_change_and_none_becomes_one_of_defaults() {
        let r = VLLM_0_32_0;
        let mut v = add();
        let rw = rewrite("sampling_params.structured_outputs", Replacement::Other);
        assert_eq!(apply(&mut v, r.engine_core_request, &rw), Ok(1));
        let so = sp_field(&v, "structured_outputs");
        let Value::Struct(so) = so else { panic!("{so:?}") };
        assert_eq!(so.schema.name, "StructuredOutputsParams");
        // Once a struct: its first field that has another value changes.
        assert_eq!(apply(&mut v, r.engine_core_request, &rw), Ok(1));
        let Value::Struct(again) = sp_field(&v, "structured_outputs") else { panic!() };
        assert_ne!(again, so);
    }

    #[test]
    fn a_required_field_has_no_default_to_drop_to_and_a_wrong_path_is_named() {
        let r = VLLM_0_32_0;
        let mut v = add();
        assert_eq!(apply(&mut v, r.engine_core_request, &rewrite("request_id", Replacement::Default)), Ok(0));
        let e = apply(&mut v, r.engine_core_request, &rewrite("sampling_params.nope", Replacement::Other)).unwrap_err();
        assert!(e.to_string().contains("SamplingParams has no field nope"), "{e}");
        let e = apply(&mut v, r.engine_core_request, &rewrite("request_id.x", Replacement::Other)).unwrap_err();
        assert!(matches!(e, RewriteError::NotAStruct { .. }), "{e}");
    }

    #[test]
    fn every_output_of_a_batch_is_rewritten_through_a_star() {
        let r = VLLM_0_32_0;
        let out = StructValue::with_defaults(r.engine_core_output);
        let mut a = out.clone();
        a.set("request_id", Value::Str("a".into())).set("new_token_ids", Value::IntArray(vec![7]));
        let mut b = out;
        b.set("request_id", Value::Str("b".into())).set("new_token_ids", Value::IntArray(vec![8]));
        b.set("finish_reason", Value::Int(0));
        let schema = r.engine_core_outputs.as_struct().unwrap();
        let mut batch = StructValue::with_defaults(schema);
        batch.set("outputs", Value::Array(vec![Value::Struct(a), Value::Struct(b)]));
        let mut v = Value::Struct(batch);
        let rw = rewrite("outputs.*.finish_reason", Replacement::Other);
        assert_eq!(apply(&mut v, r.engine_core_outputs, &rw), Ok(2));
        let frames = encode_message(r, MessageKind::EngineCoreOutputs, &v).unwrap();
        assert!(decode_message(r, MessageKind::EngineCoreOutputs, &frames, &Limits::default()).is_ok());
    }

    #[test]
    fn swapping_a_logprob_row_exchanges_its_last_two_alternatives_only() {
        let t = Tensor {
            dtype: "<i4".into(),
            shape: vec![2, 4],
            data: [1i32, 2, 3, 4, 5, 6, 7, 8].iter().flat_map(|x| x.to_le_bytes()).collect(),
        };
        let Some(Value::Tensor(s)) = swap_last_two(&Value::Tensor(Box::new(t))) else { panic!() };
        assert_eq!(s.numbers(), Some(Numbers::Ints(vec![1, 2, 4, 3, 5, 6, 8, 7])));
        let three_columns = Tensor { dtype: "<i4".into(), shape: vec![2, 3], data: vec![0; 24] };
        assert_eq!(swap_last_two(&Value::Tensor(Box::new(three_columns))), None);
        let same = Tensor { dtype: "<i4".into(), shape: vec![1, 4], data: vec![0; 16] };
        assert_eq!(swap_last_two(&Value::Tensor(Box::new(same))), None, "equal alternatives: nothing to swap");
    }
}

#[cfg(test)]
mod logprob_rows {
    use super::*;
    use engine_protocol::{decode_message, encode_message, Limits, MessageKind, Numbers, VLLM_0_32_0};

    fn tensor(dtype: &str, shape: Vec<i64>, data: Vec<u8>) -> Value {
        Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
    }

    #[test]
    fn a_logprob_row_of_an_output_batch_is_swapped_through_the_wire() {
        let r = VLLM_0_32_0;
        let lists_schema =
            r.engine_core_output.fields.iter().find(|f| f.name == "new_logprobs").unwrap().ty.as_struct().unwrap();
        let mut lists = StructValue::with_defaults(lists_schema);
        lists
            .set(
                "logprob_token_ids",
                tensor("<i4", vec![1, 4], [5i32, 5, 6, 7].iter().flat_map(|x| x.to_le_bytes()).collect()),
            )
            .set(
                "logprobs",
                tensor("<f4", vec![1, 4], [-0.5f32, -0.5, -1.0, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect()),
            )
            .set("sampled_token_ranks", tensor("<i8", vec![1], 1i64.to_le_bytes().to_vec()));
        let mut out = StructValue::with_defaults(r.engine_core_output);
        out.set("request_id", Value::Str("a".into())).set("new_token_ids", Value::IntArray(vec![5]));
        out.set("new_logprobs", Value::Struct(lists));
        let mut batch = StructValue::with_defaults(r.engine_core_outputs.as_struct().unwrap());
        batch.set("outputs", Value::Array(vec![Value::Struct(out)]));
        let frames = encode_message(r, MessageKind::EngineCoreOutputs, &Value::Struct(batch)).unwrap();
        let mut v = decode_message(r, MessageKind::EngineCoreOutputs, &frames, &Limits::default()).unwrap().value;
        let rw = Rewrite { path: "outputs.*.new_logprobs".into(), to: Replacement::SwapLastTwo };
        assert_eq!(apply(&mut v, r.engine_core_outputs, &rw), Ok(1));
        let Value::Struct(b) = &v else { panic!() };
        let Value::Array(outs) = b.get("outputs").unwrap() else { panic!() };
        let Value::Struct(o) = &outs[0] else { panic!() };
        let lp = o.struct_field("new_logprobs").unwrap();
        let Value::Tensor(ids) = lp.get("logprob_token_ids").unwrap() else { panic!() };
        assert_eq!(ids.numbers(), Some(Numbers::Ints(vec![5, 5, 7, 6])));
    }
}
