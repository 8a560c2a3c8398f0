//! Structure-aware generation of valid messages, for fuzzing (feature
//! `arbitrary`, used by `fuzz/fuzz_targets/roundtrip.rs`).
//!
//! [`message`] walks a release's schema table and draws a [`Value`] of a
//! message kind from [`arbitrary::Unstructured`], in the canonical form the
//! decoder itself produces, so that `decode(encode(v))` must give back `v`
//! exactly:
//!
//! - `list[int]` and `set[int]` are [`Value::IntArray`] (unless an element
//!   is above `i64::MAX`); sets hold distinct elements; `Any` arrays are
//!   [`Value::Array`];
//! - integers above `i64::MAX` are [`Value::UInt`], all others
//!   [`Value::Int`]; `float` fields hold floats (any bit pattern, NaN
//!   included) or integers, as on the wire;
//! - structs hold every field; open maps (`HandshakeStatus`) keep their
//!   entries in wire order, required keys included, unknown keys never named
//!   like a schema field;
//! - tensors have a dtype their kind accepts and exactly
//!   `itemsize * product(shape)` bytes, sometimes 256 bytes or more so that
//!   the encoder moves them to an aux frame.
//!
//! Validators (`crate::validate`) are respected: the fields a rule table
//! checks are drawn inside the rule's bounds (sampling parameters, LoRA
//! requests; repetition detection from small ranges),
//! a `StructuredOutputsParams` gets exactly one constraint, and a struct that
//! still violates its rule has the offending fields reset to their defaults;
//! when that is not possible the draw fails with
//! [`arbitrary::Error::IncorrectFormat`] and the fuzz target skips the input.
//!
//! The same rule tables give invalid values: [`breaking_value`] draws a
//! value outside one rule's bounds and [`invalid_struct`] a struct that
//! breaks exactly one rule, which the decoder must reject with
//! `validation` at that rule's field.
#![warn(missing_docs)]

use arbitrary::{Arbitrary, Error as ArbError, Result, Unstructured};

use crate::message::MessageKind;
use crate::schema::Rules;
use crate::schema::{Default, Field, Layout, ReleaseSchema, StructSchema, TensorKind, Ty, VLLM_RELEASES};
use crate::validate::{Check, Rule, LORA_REQUEST_RULES, SAMPLING_PARAMS_RULES};
use crate::value::{default_for, numpy_dtype, torch_dtype, StructValue, Tensor, Value};

/// Deepest nesting of generated `Any` values.
const MAX_ANY_DEPTH: usize = 4;
/// Longest generated collection.
const MAX_LEN: usize = 6;

/// A generated message: the release and kind it was drawn for, and a value
/// that the decoder of that release must accept once encoded.
#[derive(Debug, Clone)]
pub struct GeneratedMessage {
    /// The release drawn.
    pub release: &'static ReleaseSchema,
    /// The message kind drawn.
    pub kind: MessageKind,
    /// A valid value of that kind.
    pub value: Value,
}

impl<'a> Arbitrary<'a> for GeneratedMessage {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let release = *u.choose(VLLM_RELEASES)?;
        let kind = *u.choose(&MessageKind::ALL)?;
        let value = message(u, release, kind)?;
        Ok(GeneratedMessage { release, kind, value })
    }
}

/// A valid value of message `kind` in `release`.
pub fn message(u: &mut Unstructured<'_>, release: &'static ReleaseSchema, kind: MessageKind) -> Result<Value> {
    value(u, kind.payload_type(release))
}

/// A valid value of type `ty`.
pub fn value(u: &mut Unstructured<'_>, ty: &'static Ty) -> Result<Value> {
    Gen { u }.value(ty, 0)
}

struct Gen<'u, 'a> {
    u: &'u mut Unstructured<'a>,
}

const NUMPY_DTYPES: &[&str] = &[
    "<i4", "<f4", "<i8", "|u1", "|b1", "<f2", "<f8", ">i4", ">f4", "=i8", "<u2", "|i1", "int32", "float32", "int64",
    "uint8", "bool", "float16",
];
const TORCH_DTYPES: &[&str] = &[
    "int32", "float32", "int64", "bfloat16", "float16", "uint8", "bool", "int8", "int16", "float64", "int", "long",
    "half", "float", "double", "short",
];

impl Gen<'_, '_> {
    fn len(&mut self) -> Result<usize> {
        self.u.int_in_range(0..=MAX_LEN)
    }

    fn int(&mut self) -> Result<Value> {
        Ok(match self.u.int_in_range(0u8..=5)? {
            0 => Value::Int(self.u.int_in_range(0..=127)?),
            1 => Value::Int(-self.u.int_in_range(1..=32)?),
            2 => Value::Int(*self.u.choose(&[
                128,
                255,
                256,
                65535,
                65536,
                -33,
                -128,
                -129,
                -32768,
                -32769,
                i64::MIN,
                i64::MAX,
            ])?),
            3 => Value::Int(i64::from(self.u.arbitrary::<i32>()?)),
            4 => Value::Int(self.u.arbitrary()?),
            _ => Value::UInt(self.u.int_in_range(i64::MAX as u64 + 1..=u64::MAX)?),
        })
    }

    fn float(&mut self) -> Result<Value> {
        Ok(match self.u.int_in_range(0u8..=4)? {
            0 => Value::Float(*self.u.choose(&[0.0, -0.0, 1.0, 0.5, -1.5, 1e-300, f64::MAX, f64::MIN_POSITIVE])?),
            1 => Value::Float(*self.u.choose(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY])?),
            2 => Value::Float(f64::from_bits(self.u.arbitrary()?)),
            3 => Value::Float(f64::from(self.u.arbitrary::<f32>()?)),
            _ => self.int()?,
        })
    }

    /// A number in `[lo, hi]` (`lo_open`: excluding `lo`), as a float or,
    /// sometimes, an integer: what a float field with a range accepts.
    fn float_in(&mut self, lo: f64, hi: f64, lo_open: bool) -> Result<Value> {
        let frac = f64::from(self.u.arbitrary::<u32>()?) / f64::from(u32::MAX);
        let mut x = lo + (hi - lo) * frac;
        if lo_open && x <= lo {
            x = hi;
        }
        if self.u.ratio(1, 8)? {
            let i = x.round();
            if i >= lo && i <= hi && !(lo_open && i <= lo) {
                return Ok(Value::Int(i as i64));
            }
        }
        Ok(Value::Float(x))
    }

    fn string(&mut self) -> Result<String> {
        let mut s: String = self.u.arbitrary()?;
        if self.u.ratio(1, 32)? {
            // Past the fixstr, str8 and str16 size classes.
            let n = *self.u.choose(&[32usize, 255, 256, 65536])?;
            s.push_str(&"x".repeat(n));
        }
        Ok(s)
    }

    fn any(&mut self, depth: usize) -> Result<Value> {
        let top = if depth >= MAX_ANY_DEPTH { 7 } else { 9 };
        Ok(match self.u.int_in_range(0u8..=top)? {
            0 => Value::Nil,
            1 => Value::Bool(self.u.arbitrary()?),
            2 => self.int()?,
            3 => self.float()?,
            4 | 5 => Value::Str(self.string()?),
            6 => Value::Bytes(self.u.arbitrary()?),
            7 => Value::Ext(3, self.u.arbitrary()?),
            8 => {
                let n = self.len()?;
                let mut xs = Vec::with_capacity(n);
                for _ in 0..n {
                    xs.push(self.any(depth + 1)?);
                }
                Value::Array(xs)
            }
            _ => {
                let n = self.len()?;
                let mut m = Vec::with_capacity(n);
                for _ in 0..n {
                    // Keys of any kind, as MessagePack allows.
                    let k = if self.u.ratio(3, 4)? { Value::Str(self.string()?) } else { self.any(MAX_ANY_DEPTH)? };
                    m.push((k, self.any(depth + 1)?));
                }
                Value::Map(m)
            }
        })
    }

    fn tensor(&mut self, kind: TensorKind) -> Result<Tensor> {
        let dtypes = if kind == TensorKind::Numpy { NUMPY_DTYPES } else { TORCH_DTYPES };
        let dtype = *self.u.choose(dtypes)?;
        let parsed = match kind {
            TensorKind::Numpy => numpy_dtype(dtype),
            TensorKind::Torch => torch_dtype(dtype),
        }
        .ok_or(ArbError::IncorrectFormat)?;
        let dims = self.u.int_in_range(0..=3)?;
        let big = self.u.ratio(1, 6)?;
        let mut shape = Vec::with_capacity(dims);
        for _ in 0..dims {
            shape.push(if big { self.u.int_in_range(8..=40)? } else { self.u.int_in_range(0..=6)? });
        }
        let count = Tensor::element_count(&shape).ok_or(ArbError::IncorrectFormat)?;
        let n = count * parsed.elem.size();
        let mut data = self.u.bytes(n.min(self.u.len()))?.to_vec();
        data.resize(n, 0);
        Ok(Tensor { dtype: dtype.to_string(), shape, data })
    }

    fn nested_tensors(&mut self, depth: usize) -> Result<Value> {
        let top = if depth >= 2 { 2 } else { 3 };
        Ok(match self.u.int_in_range(0u8..=top)? {
            0 => Value::Tensor(Box::new(self.tensor(TensorKind::Torch)?)),
            1 => self.int()?,
            2 => Value::Float(f64::from_bits(self.u.arbitrary()?)),
            _ => {
                let n = self.len()?;
                let mut xs = Vec::with_capacity(n);
                for _ in 0..n {
                    xs.push(self.nested_tensors(depth + 1)?);
                }
                Value::Array(xs)
            }
        })
    }

    #[allow(unreachable_patterns, reason = "a `Ty` added later makes the draw fail, not the build")]
    fn value(&mut self, ty: &'static Ty, depth: usize) -> Result<Value> {
        Ok(match ty {
            Ty::Any => self.any(0)?,
            Ty::Bool => Value::Bool(self.u.arbitrary()?),
            Ty::Int => self.int()?,
            Ty::Float => self.float()?,
            Ty::Str => Value::Str(self.string()?),
            Ty::Bytes => Value::Bytes(self.u.arbitrary()?),
            Ty::IntEnum(e) => Value::Int(self.u.choose(e.values)?.0),
            Ty::StrLiteral(xs) => Value::Str((*self.u.choose(xs)?).to_string()),
            Ty::Optional(inner) => {
                if self.u.ratio(1, 3)? {
                    Value::Nil
                } else {
                    self.value(inner, depth)?
                }
            }
            Ty::List(inner) | Ty::Set(inner) => {
                let set = matches!(ty, Ty::Set(_));
                let n = self.len()?;
                let mut xs = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = self.value(inner, depth + 1)?;
                    if !set || !xs.contains(&x) {
                        xs.push(x);
                    }
                }
                if matches!(inner, Ty::Int) && xs.iter().all(|x| matches!(x, Value::Int(_))) {
                    Value::IntArray(xs.into_iter().map(|x| if let Value::Int(i) = x { i } else { 0 }).collect())
                } else {
                    Value::Array(xs)
                }
            }
            Ty::Dict(k, v) => {
                let n = self.len()?;
                let mut m = Vec::with_capacity(n);
                for _ in 0..n {
                    m.push((self.value(k, depth + 1)?, self.value(v, depth + 1)?));
                }
                Value::Map(m)
            }
            Ty::Union(members) => {
                let m = self.u.choose(members)?;
                self.value(m, depth)?
            }
            Ty::Struct(s) => Value::Struct(self.struct_value(s, depth)?),
            Ty::Tensor(kind) => Value::Tensor(Box::new(self.tensor(*kind)?)),
            Ty::UtilityResult => Value::Array(vec![Value::Nil, self.any(depth + 1)?]),
            Ty::NestedTensors => self.nested_tensors(0)?,
            _ => return Err(ArbError::IncorrectFormat),
        })
    }

    fn struct_value(&mut self, s: &'static StructSchema, depth: usize) -> Result<StructValue> {
        if s.layout == Layout::OpenMap {
            return self.open_map(s, depth);
        }
        let mut fields = Vec::with_capacity(s.fields.len());
        for field in s.fields {
            let v = match self.special(s, field)? {
                Some(v) => v,
                None => self.value(field.ty, depth + 1)?,
            };
            fields.push(v);
        }
        let mut v = StructValue::new(s, fields);
        if s.name == "StructuredOutputsParams" {
            self.one_constraint(&mut v, depth)?;
        }
        if s.validate.is_some() {
            let mut tries = 0;
            while let Err(violation) = crate::validate::check(s, &v) {
                tries += 1;
                if tries > 4 || violation.fields.is_empty() {
                    return Err(ArbError::IncorrectFormat);
                }
                for name in violation.fields.iter().copied() {
                    let i = s.index_of(name).ok_or(ArbError::IncorrectFormat)?;
                    if s.fields[i].default == Default::Required {
                        return Err(ArbError::IncorrectFormat);
                    }
                    *v.field_mut(i) = default_for(&s.fields[i]);
                }
            }
        }
        Ok(v)
    }

    /// Valid values for the fields a rule table checks
    /// (`crate::validate::SAMPLING_PARAMS_RULES`, `LORA_REQUEST_RULES`),
    /// drawn most of the time from the rule's bounds (otherwise the field is
    /// drawn from its type and the repair loop of `struct_value` resets it
    /// when it breaks the rule); optional fields are sometimes nil.
    fn special(&mut self, s: &StructSchema, f: &Field) -> Result<Option<Value>> {
        if !self.u.ratio(7, 8)? {
            return Ok(None);
        }
        let rules: &[Rule] = match s.validate {
            Some(tag @ (Rules::SamplingParams | Rules::SamplingParams0_23 | Rules::SamplingParams0_22)) => {
                crate::validate::rules_for(tag).unwrap_or(SAMPLING_PARAMS_RULES)
            }
            Some(Rules::LoraRequest) => LORA_REQUEST_RULES,
            Some(Rules::RepetitionDetectionParams) => {
                return Ok(Some(match f.name {
                    "max_pattern_size" | "min_pattern_size" | "min_count" => Value::Int(self.u.int_in_range(0..=8)?),
                    _ => return Ok(None),
                }))
            }
            _ => return Ok(None),
        };
        // A boolean another field's rule needs true (`detokenize` for stops).
        if rules.iter().any(|r| r.check == Check::NeedsTrue(f.name)) {
            return Ok(Some(Value::Bool(true)));
        }
        let Some(r) = rules.iter().find(|r| r.field == f.name) else { return Ok(None) };
        if matches!(f.ty, Ty::Optional(_)) && self.u.ratio(1, 4)? {
            return Ok(Some(Value::Nil));
        }
        Ok(Some(match r.check {
            Check::IntAtLeast(min) => Value::Int(self.u.int_in_range(min..=min.saturating_add(64))?),
            Check::Range { lo, lo_open, hi, .. } => {
                let hi = if hi.is_finite() { hi } else { lo + 4.0 };
                self.float_in(lo, hi, lo_open)?
            }
            Check::NoEmptyString if matches!(f.ty, Ty::Str) => Value::Str(format!("/{}", self.string()?)),
            _ => return Ok(None),
        }))
    }

    /// Exactly one constraint set (`json_object: false` counts as set).
    fn one_constraint(&mut self, v: &mut StructValue, depth: usize) -> Result<()> {
        let fields = crate::validate::CONSTRAINT_FIELDS;
        let keep = *self.u.choose(&fields)?;
        for name in fields {
            let Some(i) = v.schema.index_of(name) else { continue };
            if name != keep {
                *v.field_mut(i) = Value::Nil;
            } else if *v.field(i) == Value::Nil {
                let inner = match v.schema.fields[i].ty {
                    Ty::Optional(t) => t,
                    t => t,
                };
                *v.field_mut(i) = self.value(inner, depth + 1)?;
            }
        }
        Ok(())
    }

    /// A plain dict with known keys: every required key, maybe the optional
    /// ones, maybe unknown keys (never named like a schema field).
    fn open_map(&mut self, s: &'static StructSchema, depth: usize) -> Result<StructValue> {
        let mut entries = Vec::new();
        for field in s.fields {
            if field.default == Default::Required || self.u.ratio(1, 2)? {
                let x = self.value(field.ty, depth + 1)?;
                entries.push((Value::Str(field.name.to_string()), x));
            }
        }
        for _ in 0..self.u.int_in_range(0..=2)? {
            let k = format!("x-{}", self.string()?);
            let x = self.any(depth + 1)?;
            entries.push((Value::Str(k), x));
        }
        if entries.len() > 1 && self.u.ratio(1, 2)? {
            let a = self.u.choose_index(entries.len())?;
            let b = self.u.choose_index(entries.len())?;
            entries.swap(a, b);
        }
        let mut v = StructValue::with_defaults(s);
        *v.open_entries_mut() = entries;
        Ok(v)
    }
}

/// A value of `field` that breaks single-field `rule` (a relation gives
/// [`arbitrary::Error::IncorrectFormat`]), drawn from the rule's own bounds:
/// an integer below its minimum or above its maximum; a number below or above its range, or NaN;
/// an empty string (in a list when the field takes one).
pub fn breaking_value(u: &mut Unstructured<'_>, field: &Field, rule: &Rule) -> Result<Value> {
    Ok(match rule.check {
        Check::IntAtLeast(min) => {
            let below = min.checked_sub(1).ok_or(ArbError::IncorrectFormat)?;
            Value::Int(if u.ratio(1, 2)? { below } else { u.int_in_range(i64::MIN..=below)? })
        }
        Check::IntAtMost(max) => {
            let above = max.checked_add(1).ok_or(ArbError::IncorrectFormat)?;
            Value::Int(if u.ratio(1, 2)? { above } else { u.int_in_range(above..=i64::MAX)? })
        }
        Check::Range { lo, lo_open, hi, hi_open } => {
            let step = f64::from(u.int_in_range(1u32..=1_000_000)?) / 1000.0;
            match u.int_in_range(0u8..=3)? {
                0 if lo_open => Value::Float(lo),
                1 if hi_open && hi.is_finite() => Value::Float(hi),
                1 if hi.is_finite() => Value::Float(hi + step),
                2 => Value::Float(f64::NAN),
                _ => Value::Float(lo - step),
            }
        }
        Check::NoEmptyString => match field.ty {
            Ty::Str => Value::Str(String::new()),
            _ => Value::Array(vec![Value::Str(String::new())]),
        },
        _ => return Err(ArbError::IncorrectFormat),
    })
}

/// A struct of `s` (a table tagged with a rule table: `SamplingParams`,
/// `LoRARequest`) that is valid but for one single-field rule, drawn from
/// the table ([`breaking_value`]): the value and the rule it breaks. The
/// decoder must reject it with `validation` at that rule's field.
pub fn invalid_struct(u: &mut Unstructured<'_>, s: &'static StructSchema) -> Result<(StructValue, &'static Rule)> {
    let rules: &'static [Rule] = match s.validate {
        Some(tag @ (Rules::SamplingParams | Rules::SamplingParams0_23 | Rules::SamplingParams0_22)) => {
            crate::validate::rules_for(tag).unwrap_or(SAMPLING_PARAMS_RULES)
        }
        Some(Rules::LoraRequest) => LORA_REQUEST_RULES,
        _ => return Err(ArbError::IncorrectFormat),
    };
    let single: Vec<&'static Rule> = rules.iter().filter(|r| !r.check.is_relation()).collect();
    let rule = *u.choose(&single)?;
    let mut v = Gen { u }.struct_value(s, 0)?;
    let i = s.index_of(rule.field).ok_or(ArbError::IncorrectFormat)?;
    *v.field_mut(i) = breaking_value(u, &s.fields[i], rule)?;
    Ok((v, rule))
}

/// Deterministic pseudo-random bytes (xorshift64 of `seed`): generator
/// input for tests and fuzz seeds that need no fuzzer.
pub fn pseudo_random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_message, encode_message, Limits};

    /// Deterministic pseudo-random bytes, so the test needs no fuzzer:
    /// every message kind of every release, many draws each.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        super::pseudo_random_bytes(seed, n)
    }

    #[test]
    fn structs_breaking_one_rule_are_rejected_by_the_decoder_at_that_field() {
        let mut judged = 0;
        for release in VLLM_RELEASES {
            let request = release.engine_core_request.as_struct().expect("a struct root");
            for seed in 0..200u64 {
                let data = bytes(seed * 7919 + 1, 4096);
                let mut u = Unstructured::new(&data);
                let Ok((sp, rule)) = invalid_struct(&mut u, release.sampling_params) else { continue };
                judged += 1;
                let mut req = StructValue::with_defaults(request);
                req.set("request_id", Value::Str("r".into()));
                let prompt = crate::typed::TokenIds::from_i32(vec![1]).value_in(release).expect("a prompt");
                req.set("prompt_token_ids", prompt);
                req.set("sampling_params", Value::Struct(sp));
                req.set("arrival_time", Value::Float(0.0));
                let ty = MessageKind::EngineCoreRequest.payload_type(release);
                let payload = crate::encode::encode_payload_unvalidated("EngineCoreRequest", ty, &Value::Struct(req))
                    .expect("encodes without the rules");
                let mut frames: Vec<&[u8]> = vec![&[0u8]];
                frames.extend(payload.iter().map(Vec::as_slice));
                let e = decode_message(release, MessageKind::EngineCoreRequest, &frames, &Limits::default())
                    .expect_err("a broken rule is rejected");
                assert_eq!(e.class, crate::RejectClass::Validation, "{e}");
                assert_eq!(e.path, format!("EngineCoreRequest.sampling_params.{}", rule.field), "{e}");
            }
        }
        assert!(judged > 300, "only {judged} draws");
    }

    #[test]
    fn generated_messages_roundtrip_exactly() {
        let mut drawn = 0;
        for release in VLLM_RELEASES {
            for kind in MessageKind::ALL {
                for seed in 0..300u64 {
                    let data = bytes(seed * 31 + kind as u64, 4096);
                    let mut u = Unstructured::new(&data);
                    let Ok(v) = message(&mut u, release, kind) else { continue };
                    drawn += 1;
                    let frames = encode_message(release, kind, &v).expect("a generated value encodes");
                    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                    let d = decode_message(release, kind, &refs, &Limits::default()).unwrap_or_else(|e| {
                        panic!("{} {}: generated value rejected: {e}", release.version, kind.name())
                    });
                    assert!(d.drift.is_empty());
                    let again = encode_message(release, kind, &d.value).expect("re-encodes");
                    assert_eq!(again, frames, "{} {}: encode is not a fixed point", release.version, kind.name());
                }
            }
        }
        assert!(drawn > 3000, "only {drawn} draws succeeded");
    }
}
