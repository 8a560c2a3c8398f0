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
//! Validators (`crate::validate`) are respected: a few fields are drawn from
//! their valid ranges (sampling parameters, LoRA ids, repetition detection),
//! a `StructuredOutputsParams` gets exactly one constraint, and a struct that
//! still violates its rule has the offending fields reset to their defaults;
//! when that is not possible the draw fails with
//! [`arbitrary::Error::IncorrectFormat`] and the fuzz target skips the input.

use arbitrary::{Arbitrary, Error as ArbError, Result, Unstructured};

use crate::message::MessageKind;
use crate::schema::{Default, Field, Layout, ReleaseSchema, StructSchema, TensorKind, Ty, RELEASES};
use crate::value::{default_for, numpy_dtype, torch_dtype, StructValue, Tensor, Value};

/// Deepest nesting of generated `Any` values.
const MAX_ANY_DEPTH: usize = 4;
/// Longest generated collection.
const MAX_LEN: usize = 6;

/// A generated message: the release and kind it was drawn for, and a value
/// that the decoder of that release must accept once encoded.
#[derive(Debug, Clone)]
pub struct GeneratedMessage {
    pub release: &'static ReleaseSchema,
    pub kind: MessageKind,
    pub value: Value,
}

impl<'a> Arbitrary<'a> for GeneratedMessage {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let release = *u.choose(RELEASES)?;
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

    #[allow(unreachable_patterns)] // a `Ty` added later makes the draw fail, not the build
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
        if let Some(validate) = s.validate {
            let mut tries = 0;
            while let Err(violation) = validate(&v) {
                tries += 1;
                if tries > 4 || violation.field.is_empty() {
                    return Err(ArbError::IncorrectFormat);
                }
                for name in violation.field.split(',') {
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

    /// Valid ranges for the fields validators check, drawn most of the time
    /// (otherwise the field is drawn from its type and the repair loop of
    /// `struct_value` resets it when it is out of range).
    fn special(&mut self, s: &StructSchema, f: &Field) -> Result<Option<Value>> {
        if !self.u.ratio(7, 8)? {
            return Ok(None);
        }
        let opt = |u: &mut Unstructured<'_>| -> Result<bool> { u.ratio(1, 4) };
        Ok(Some(match (s.name, f.name) {
            ("SamplingParams", "n") => Value::Int(self.u.int_in_range(1..=4)?),
            ("SamplingParams", "presence_penalty" | "frequency_penalty") => self.float_in(-2.0, 2.0, false)?,
            ("SamplingParams", "repetition_penalty") => self.float_in(0.0, 4.0, true)?,
            ("SamplingParams", "temperature") => self.float_in(0.0, 2.0, false)?,
            ("SamplingParams", "top_p") => self.float_in(0.0, 1.0, true)?,
            ("SamplingParams", "min_p") => self.float_in(0.0, 1.0, false)?,
            ("SamplingParams", "top_k") => Value::Int(self.u.int_in_range(-1..=100)?),
            ("SamplingParams", "max_tokens") if !opt(self.u)? => Value::Int(self.u.int_in_range(1..=100_000)?),
            ("SamplingParams", "min_tokens") => Value::Int(self.u.int_in_range(0..=16)?),
            ("SamplingParams", "logprobs" | "prompt_logprobs") if !opt(self.u)? => {
                Value::Int(self.u.int_in_range(-1..=20)?)
            }
            ("SamplingParams", "stream_interval") if !opt(self.u)? => Value::Int(self.u.int_in_range(1..=64)?),
            ("SamplingParams", "thinking_token_budget") if !opt(self.u)? => Value::Int(self.u.int_in_range(-1..=4096)?),
            ("SamplingParams", "detokenize") => Value::Bool(true),
            ("LoRARequest", "lora_int_id") => Value::Int(self.u.int_in_range(1..=i64::MAX)?),
            ("LoRARequest", "lora_path") => Value::Str(format!("/{}", self.string()?)),
            ("RepetitionDetectionParams", "max_pattern_size" | "min_pattern_size") => {
                Value::Int(self.u.int_in_range(0..=8)?)
            }
            ("RepetitionDetectionParams", "min_count") => Value::Int(self.u.int_in_range(0..=8)?),
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
    fn generated_messages_roundtrip_exactly() {
        let mut drawn = 0;
        for release in RELEASES {
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
