//! The validations vLLM's typed decoder runs on decode (msgspec calls
//! `__post_init__` on Structs and dataclasses), so a conformant gateway never
//! sends what they reject: on a real engine such a payload raises inside the
//! input thread and the engine stops reading input (docs/wire-protocol.md §10.1).
//!
//! Sources: docs/wire-protocol.md §10.2-§10.4; verdicts of vLLM 0.32/0.33's
//! own decoder on the `mutant` goldens.
//!
//! # One home per rule, one interpreter
//!
//! The schema tables name which rules apply to a struct by a data tag
//! ([`Rules`]); [`check`] interprets it. The range and relation rules of
//! `SamplingParams.__post_init__` / `_verify_args`, of
//! `LoRARequest.__post_init__` and of TokenSpeed's `SamplingParams.verify`
//! are data ([`SAMPLING_PARAMS_RULES`], [`LORA_REQUEST_RULES`],
//! [`tokenspeed::VERIFY_RULES`]: one [`Rule`] record per check, in the
//! engine's order), judged by one interpreter: [`Rule::eval`] on borrowed
//! views of the fields ([`FieldRef`]), driven by [`first_violation`] over
//! anything that lends its fields by name ([`RuleFields`]: a
//! [`StructValue`] and the typed `SamplingParams`). The decoder judges
//! values with it, the direct request decoder and
//! `typed::EngineCoreRequest::encode_checked` judge the typed struct with
//! it (each rule's fields looked up once, no allocation on the way),
//! `crate::translate` judges the `SamplingParams` it drafts with it, and
//! the fuzzing generator (`arbitrary`) draws values inside each rule's
//! bounds. The structured-output "exactly one constraint" rule is
//! [`exactly_one_constraint`], used by the decoder, the typed API and the
//! translation layer alike. A violation names its fields as a list
//! ([`Violation::fields`](crate::Violation::fields)).
//!
//! The decoder reads a struct value's own table through a `RuleIndex`
//! built once per struct (cached by struct identity, `crate::registry`):
//! each rule's field resolved to a position, so a struct is judged by the
//! fields it holds; the verdicts are those of [`first_violation`]'s lookup
//! by name.
#![warn(missing_docs)]

use crate::error::Violation;
use crate::registry::PerStruct;
use crate::schema::{Rules, StructSchema};
use crate::value::{StructValue, Value};

/// Runs the rules the table of `s` tags it with ([`StructSchema::validate`])
/// on `v`; `Ok` for a struct without rules.
pub fn check(s: &StructSchema, v: &StructValue) -> Result<(), Violation> {
    match s.validate {
        None => Ok(()),
        Some(Rules::SamplingParams) => sampling_params(v),
        Some(Rules::SamplingParams0_23) => first_violation_in(v, SAMPLING_PARAMS_RULES_0_23),
        Some(Rules::SamplingParams0_22) => first_violation_in(v, SAMPLING_PARAMS_RULES_0_22),
        Some(Rules::StructuredOutputsParams) => structured_outputs_params(v),
        Some(Rules::LoraRequest) => lora_request(v),
        Some(Rules::RepetitionDetectionParams) => repetition_detection_params(v),
        Some(Rules::TokenSpeedHandshakeInit) => tokenspeed::handshake_init(v),
    }
}

/// What a [`Rule`] checks on its field.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Check {
    /// An integer at least this; nil passes.
    IntAtLeast(i64),
    /// An integer at most this; nil passes.
    IntAtMost(i64),
    /// A number (float or integer) within bounds; NaN fails, nil passes.
    Range {
        /// Lower bound.
        lo: f64,
        /// Whether `lo` itself is excluded.
        lo_open: bool,
        /// Upper bound (may be infinite).
        hi: f64,
        /// Whether `hi` itself is excluded.
        hi_open: bool,
    },
    /// A number not below this; NaN and nil pass (TokenSpeed's
    /// `x < 0` test).
    NotBelow(f64),
    /// A number above this; NaN and nil pass (vLLM's `x <= lo` test before
    /// 0.24.0).
    Above(f64),
    /// A string, or a list of strings, none of them empty.
    NoEmptyString,
    /// An integer at least `min`, or exactly `except`; nil passes.
    IntAtLeastUnless {
        /// The lower bound.
        min: i64,
        /// The one value below it that passes.
        except: i64,
    },
    /// An integer below `max`, or exactly `except`; nil passes.
    IntBelowUnless {
        /// The bound (excluded).
        max: i64,
        /// The one value at or above it that passes.
        except: i64,
    },
    /// An integer equal to this; nil passes.
    IntIs(i64),
    /// At most one of these fields set (not nil); the violation names them
    /// all. The rule's own field is the first of them.
    AtMostOneSet(&'static [&'static str]),
    /// An integer not above the named field's integer (either nil passes).
    NotAbove(&'static str),
    /// When the field holds a string or a non-empty list, the named
    /// boolean field must be true.
    NeedsTrue(&'static str),
    /// At most 1 when the named number field is below `below`.
    OneWhenBelow {
        /// The number field.
        other: &'static str,
        /// The threshold.
        below: f64,
    },
}

/// One rule: the field it is about, what it checks, and the phrase a
/// violation reports (the value found is appended).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// The Python field name (for relations, the field reported).
    pub field: &'static str,
    /// The predicate and its bounds.
    pub check: Check,
    /// What the field must be, as a violation says it.
    pub message: &'static str,
}

const fn rule(field: &'static str, check: Check, message: &'static str) -> Rule {
    Rule { field, check, message }
}

const fn range(lo: f64, lo_open: bool, hi: f64, hi_open: bool) -> Check {
    Check::Range { lo, lo_open, hi, hi_open }
}

/// vLLM's default `VLLM_MAX_N_SEQUENCES`: the most sequences (`n`) one
/// request may ask for (`_verify_num_sequences`, vLLM 0.32/0.33).
pub const MAX_N_SEQUENCES: i64 = 16384;

/// vLLM's `_SAMPLING_EPS`: a temperature below it is greedy sampling.
pub const SAMPLING_EPS: f64 = 1e-5;

/// `SamplingParams.__post_init__` / `_verify_args` rules, in the order vLLM
/// runs them: the list shared by every release from 0.22.0 on, with the
/// rules that changed between releases as arguments.
macro_rules! sampling_params_rules {
    (repetition_penalty: $rep:expr, temperature: $temp:expr $(, thinking_token_budget: $think:expr)?) => {
        &[
            rule("n", Check::IntAtLeast(1), "must be at least 1"),
            // `VLLM_MAX_N_SEQUENCES`, 16384 unless the engine's environment says
            // otherwise (`intrange/sp_n_*` goldens).
            rule("n", Check::IntAtMost(MAX_N_SEQUENCES), "must be at most 16384 (VLLM_MAX_N_SEQUENCES)"),
            rule("presence_penalty", range(-2.0, false, 2.0, false), "must be in [-2, 2]"),
            rule("frequency_penalty", range(-2.0, false, 2.0, false), "must be in [-2, 2]"),
            $rep,
            $temp,
            rule("top_p", range(0.0, true, 1.0, false), "must be in (0, 1]"),
            rule("top_k", Check::IntAtLeast(-1), "must be -1 (disabled), 0 or positive"),
            rule("min_p", range(0.0, false, 1.0, false), "must be in [0, 1]"),
            rule("max_tokens", Check::IntAtLeast(1), "must be at least 1"),
            rule("min_tokens", Check::IntAtLeast(0), "must be at least 0"),
            rule("min_tokens", Check::NotAbove("max_tokens"), "must not exceed max_tokens"),
            rule("logprobs", Check::IntAtLeast(-1), "must be -1 (whole vocabulary) or non-negative"),
            rule("prompt_logprobs", Check::IntAtLeast(-1), "must be -1 (whole vocabulary) or non-negative"),
            rule("stop", Check::NoEmptyString, "stop strings must not be empty"),
            rule("stop", Check::NeedsTrue("detokenize"), "stop strings need detokenize=True"),
            rule("bad_words", Check::NoEmptyString, "bad_words cannot contain an empty string"),
            rule("stream_interval", Check::IntAtLeast(1), "must be at least 1"),
            $($think,)?
            rule(
                "n",
                Check::OneWhenBelow { other: "temperature", below: SAMPLING_EPS },
                "must be 1 when using greedy sampling",
            ),
        ]
    };
}

const THINKING_TOKEN_BUDGET: Rule =
    rule("thinking_token_budget", Check::IntAtLeast(-1), "must be a non-negative integer or -1 for unlimited");

/// `SamplingParams.__post_init__` / `_verify_args` (vLLM 0.24.0 to 0.33.0;
/// docs/wire-protocol.md §10.2). A rule on a field a release lacks
/// (`stream_interval` before 0.27) does not apply to it.
pub static SAMPLING_PARAMS_RULES: &[Rule] = sampling_params_rules!(
    repetition_penalty: rule("repetition_penalty", range(0.0, true, f64::INFINITY, true), "must be a finite number greater than zero"),
    temperature: rule("temperature", range(0.0, false, 2.0, false), "must be in [0, 2]"),
    thinking_token_budget: THINKING_TOKEN_BUDGET
);

/// vLLM 0.23.0's rules: `temperature` only non-negative and
/// `repetition_penalty` only above zero (NaN, infinity and a temperature of
/// 3 pass: the `mutant/sp_temperature_*` and `sp_repetition_penalty_inf`
/// goldens of its own decoder).
pub static SAMPLING_PARAMS_RULES_0_23: &[Rule] = sampling_params_rules!(
    repetition_penalty: rule("repetition_penalty", Check::Above(0.0), "must be greater than zero"),
    temperature: rule("temperature", Check::NotBelow(0.0), "must be non-negative"),
    thinking_token_budget: THINKING_TOKEN_BUDGET
);

/// vLLM 0.22's rules: 0.23.0's without the `thinking_token_budget` check
/// (-5 and -2^63 pass: `mutant/sp_thinking_budget_minus5` and
/// `intrange/sp_thinking_token_budget_i64_min` of its own decoder).
pub static SAMPLING_PARAMS_RULES_0_22: &[Rule] = sampling_params_rules!(
    repetition_penalty: rule("repetition_penalty", Check::Above(0.0), "must be greater than zero"),
    temperature: rule("temperature", Check::NotBelow(0.0), "must be non-negative")
);

/// `LoRARequest.__post_init__`: a positive id and a non-empty path.
pub static LORA_REQUEST_RULES: &[Rule] = &[
    rule("lora_int_id", Check::IntAtLeast(1), "must be at least 1"),
    rule("lora_path", Check::NoEmptyString, "must not be empty"),
];

impl Check {
    /// Whether the check relates its field to another one.
    pub fn is_relation(&self) -> bool {
        self.other().is_some()
    }

    /// The other field a relation reads.
    pub fn other(&self) -> Option<&'static str> {
        match *self {
            Check::NotAbove(o) | Check::NeedsTrue(o) | Check::OneWhenBelow { other: o, .. } => Some(o),
            _ => None,
        }
    }
}

/// A field as a rule reads it: a small borrowed view of a [`Value`] or of a
/// typed struct's field, so that one interpreter ([`Rule::eval`]) judges
/// both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldRef<'a> {
    /// nil (`None`).
    Nil,
    /// A bool.
    Bool(bool),
    /// An integer: any of -2^63 ..= 2^64-1 (a Python `int`, msgspec's
    /// range), so `uint 64` values are compared by value too.
    Int(i128),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'a str),
    /// A list: its length, and whether one of its elements is an empty
    /// string.
    List {
        /// How many elements.
        len: usize,
        /// Whether an element is `""`.
        empty_str: bool,
    },
    /// A value of a kind no rule reads (a map, a struct, bytes, a list of
    /// integers): present, but neither a number, a string nor nil.
    Other,
}

impl<'a> FieldRef<'a> {
    /// The view of a value.
    #[inline]
    pub fn of(v: &'a Value) -> FieldRef<'a> {
        match v {
            Value::Nil => FieldRef::Nil,
            Value::Bool(b) => FieldRef::Bool(*b),
            Value::Int(i) => FieldRef::Int(i128::from(*i)),
            Value::UInt(u) => FieldRef::Int(i128::from(*u)),
            Value::Float(f) => FieldRef::Float(*f),
            Value::Str(s) => FieldRef::Str(s),
            Value::Array(xs) => FieldRef::List {
                len: xs.len(),
                empty_str: xs.iter().any(|x| matches!(x, Value::Str(s) if s.is_empty())),
            },
            _ => FieldRef::Other,
        }
    }

    /// The view of a list of strings.
    #[inline]
    pub fn strings(xs: &'a [String]) -> FieldRef<'a> {
        FieldRef::List { len: xs.len(), empty_str: xs.iter().any(String::is_empty) }
    }

    /// The view of an optional integer.
    #[inline]
    pub fn opt_int(v: Option<i128>) -> FieldRef<'a> {
        v.map_or(FieldRef::Nil, FieldRef::Int)
    }

    /// An integer, whatever its width.
    #[inline]
    fn int(self) -> Option<i128> {
        match self {
            FieldRef::Int(i) => Some(i),
            _ => None,
        }
    }

    /// A number (an integer widened).
    #[inline]
    fn num(self) -> Option<f64> {
        match self {
            FieldRef::Float(f) => Some(f),
            FieldRef::Int(i) => Some(i as f64),
            _ => None,
        }
    }
}

/// A struct whose fields the rules can read by name: a [`StructValue`] and
/// the typed structs the rules are run on (`typed::SamplingParams`), so
/// that [`first_violation`] is one interpreter for both.
pub trait RuleFields {
    /// Field `name` as a rule reads it (its default when not held); `None`
    /// when the struct has no such field (a rule on it is then not run).
    fn field(&self, name: &str) -> Option<FieldRef<'_>>;
}

impl RuleFields for StructValue {
    #[inline]
    fn field(&self, name: &str) -> Option<FieldRef<'_>> {
        self.get(name).map(FieldRef::of)
    }
}

impl Rule {
    /// Whether `x`, the value of [`Rule::field`], passes; `other` is the
    /// value of the field a relation reads ([`FieldRef::Nil`] when there is
    /// none). The interpreter of every single-field and relation check;
    /// a check on several fields ([`Check::AtMostOneSet`]) reads them
    /// itself in [`Rule::judge`] and passes here. Its violation, when it
    /// fails, is [`Rule::eval`]'s, built out of line: the per-request path
    /// asks only this (inlined there, into one loop over the table).
    #[inline(always)]
    pub fn holds(&self, x: FieldRef<'_>, other: FieldRef<'_>) -> bool {
        match self.check {
            Check::IntAtLeast(min) => !matches!(x.int(), Some(i) if i < i128::from(min)),
            Check::IntAtMost(max) => !matches!(x.int(), Some(i) if i > i128::from(max)),
            Check::Range { lo, lo_open, hi, hi_open } => match x.num() {
                Some(f) => {
                    let above = if lo_open { f > lo } else { f >= lo };
                    let below = if hi_open { f < hi } else { f <= hi };
                    above && below
                }
                None => true,
            },
            Check::NotBelow(lo) => !matches!(x.num(), Some(f) if f < lo),
            Check::Above(lo) => !matches!(x.num(), Some(f) if f <= lo),
            Check::NoEmptyString => match x {
                FieldRef::Str(s) => !s.is_empty(),
                FieldRef::List { empty_str, .. } => !empty_str,
                _ => true,
            },
            Check::IntAtLeastUnless { min, except } => {
                !matches!(x.int(), Some(i) if i < i128::from(min) && i != i128::from(except))
            }
            Check::IntBelowUnless { max, except } => {
                !matches!(x.int(), Some(i) if i >= i128::from(max) && i != i128::from(except))
            }
            Check::IntIs(want) => !matches!(x.int(), Some(i) if i != i128::from(want)),
            Check::NotAbove(_) => !matches!((x.int(), other.int()), (Some(a), Some(max)) if a > max),
            Check::NeedsTrue(_) => {
                let present = match x {
                    FieldRef::Str(_) => true,
                    FieldRef::List { len, .. } => len > 0,
                    _ => false,
                };
                !(present && other == FieldRef::Bool(false))
            }
            Check::OneWhenBelow { below, .. } => {
                !matches!((x.int(), other.num()), (Some(n), Some(t)) if n > 1 && t < below)
            }
            Check::AtMostOneSet(_) => true,
        }
    }

    /// [`Rule::holds`], with the violation when it does not: the rule's
    /// message and the value that failed it.
    #[inline]
    pub fn eval(&self, x: FieldRef<'_>, other: FieldRef<'_>) -> Result<(), Violation> {
        if self.holds(x, other) {
            Ok(())
        } else {
            Err(self.violation(x, other))
        }
    }

    /// The violation of a rule that does not hold for `x` (and `other`).
    #[cold]
    #[inline(never)]
    fn violation(&self, x: FieldRef<'_>, other: FieldRef<'_>) -> Violation {
        let int = |r: FieldRef<'_>| r.int().unwrap_or_default();
        let message = match self.check {
            Check::IntAtLeast(_)
            | Check::IntAtMost(_)
            | Check::IntAtLeastUnless { .. }
            | Check::IntBelowUnless { .. }
            | Check::IntIs(_)
            | Check::OneWhenBelow { .. } => format!("{}, got {}", self.message, int(x)),
            Check::Range { .. } | Check::NotBelow(_) | Check::Above(_) => {
                format!("{}, got {}", self.message, x.num().unwrap_or_default())
            }
            Check::NotAbove(_) => format!("{} ({}), got {}", self.message, int(other), int(x)),
            Check::NoEmptyString | Check::NeedsTrue(_) | Check::AtMostOneSet(_) => self.message.to_string(),
        };
        Violation::new(self.field, message)
    }

    /// Runs the rule on `f`: its field (and the field a relation reads, or
    /// the fields of a check on several) looked up by name. A rule on a
    /// field `f` lacks is not run (a field of another release).
    pub fn judge<F: RuleFields + ?Sized>(&self, f: &F) -> Result<(), Violation> {
        if let Check::AtMostOneSet(names) = self.check {
            let set = names.iter().filter(|n| f.field(n).is_some_and(|x| x != FieldRef::Nil)).count();
            if set > 1 {
                return Err(Violation::on_fields(names.to_vec(), self.message));
            }
            return Ok(());
        }
        let Some(x) = f.field(self.field) else { return Ok(()) };
        let other = self.check.other().and_then(|o| f.field(o)).unwrap_or(FieldRef::Nil);
        self.eval(x, other)
    }
}

/// The first rule of `rules` (in table order) that `f` violates: the one
/// interpreter of the rule tables, for values and typed structs alike. A
/// field not held reads as its default, as on the Python side.
pub fn first_violation<F: RuleFields + ?Sized>(f: &F, rules: &[Rule]) -> Result<(), Violation> {
    rules.iter().try_for_each(|r| r.judge(f))
}

/// [`first_violation`] on a struct value, through the struct's resolved
/// rule index when `rules` is its own table (same verdicts, without a
/// lookup by name per rule).
pub fn first_violation_in(v: &StructValue, rules: &[Rule]) -> Result<(), Violation> {
    if let Some(ix) = RuleIndex::of(v.schema).filter(|ix| std::ptr::eq(ix.table, rules)) {
        return ix.first_violation(v, rules);
    }
    first_violation(v, rules)
}

/// The rule table a tag names, when its rules are data.
pub fn rules_for(tag: Rules) -> Option<&'static [Rule]> {
    match tag {
        Rules::SamplingParams => Some(SAMPLING_PARAMS_RULES),
        Rules::SamplingParams0_23 => Some(SAMPLING_PARAMS_RULES_0_23),
        Rules::SamplingParams0_22 => Some(SAMPLING_PARAMS_RULES_0_22),
        Rules::LoraRequest => Some(LORA_REQUEST_RULES),
        _ => None,
    }
}

/// A struct's rule table resolved against its fields, computed once per
/// struct (`crate::registry`), so that the decoder judges a
/// struct by the fields it holds instead of looking every rule's field up
/// by name. Same verdicts as the lookup by name.
#[derive(Debug)]
struct RuleIndex {
    /// The table this index is for.
    table: &'static [Rule],
    /// Per field: the single-field rules on it, as a bit set of rule
    /// positions.
    on_field: Box<[u64]>,
    /// The relation rules, as a bit set.
    relations: u64,
    /// Per rule: its field's position and the other field's.
    fields: Box<[(u16, Option<u16>)]>,
    /// Single-field rules that the field's default breaks (a `LoRARequest`'s
    /// empty `lora_path`).
    default_fails: u64,
}

impl RuleIndex {
    /// The index of `s`'s rule table, built once per struct and kept out of
    /// the tables (`crate::registry`).
    fn of(s: &'static StructSchema) -> Option<&'static RuleIndex> {
        static CACHE: PerStruct<Option<RuleIndex>> = PerStruct::new();
        CACHE.get(s, || RuleIndex::new(s, s.default_values())).as_ref()
    }

    /// The index of `s`'s own rule table; `None` when it has none, a rule
    /// names a field `s` lacks, or the table has more than 64 rules.
    fn new(s: &StructSchema, defaults: &[Value]) -> Option<RuleIndex> {
        let rules = rules_for(s.validate?)?;
        if rules.len() > 64 {
            return None;
        }
        let mut on_field = vec![0u64; s.fields.len()];
        let (mut relations, mut default_fails) = (0u64, 0u64);
        let mut fields = Vec::with_capacity(rules.len());
        for (b, r) in rules.iter().enumerate() {
            if matches!(r.check, Check::AtMostOneSet(_)) {
                return None;
            }
            let at = s.index_of(r.field)?;
            let other = match r.check.other() {
                Some(o) => Some(u16::try_from(s.index_of(o)?).ok()?),
                None => None,
            };
            fields.push((u16::try_from(at).ok()?, other));
            if other.is_some() {
                relations |= 1 << b;
            } else {
                on_field[at] |= 1 << b;
                if r.eval(FieldRef::of(&defaults[at]), FieldRef::Nil).is_err() {
                    default_fails |= 1 << b;
                }
            }
        }
        Some(RuleIndex {
            table: rules,
            on_field: on_field.into_boxed_slice(),
            relations,
            fields: fields.into_boxed_slice(),
            default_fails,
        })
    }

    fn first_violation(&self, v: &StructValue, rules: &[Rule]) -> Result<(), Violation> {
        // Field `i` as `v.field(i)` reads it, with the defaults looked up
        // once for every relation below.
        let defaults = v.schema.default_values();
        let field = |i: usize| match v.entries().binary_search_by_key(&(i as u16), |(k, _)| *k) {
            Ok(at) => &v.entries()[at].1,
            Err(_) => &defaults[i],
        };
        // The first failing rule in table order: `first` is its position.
        let mut first: Option<(u32, Violation)> = None;
        let better = |first: &Option<(u32, Violation)>, b: u32| first.as_ref().is_none_or(|(f, _)| b < *f);
        let mut held = 0u64;
        for (i, x) in v.entries() {
            let mut m = self.on_field.get(*i as usize).copied().unwrap_or(0);
            held |= m;
            while m != 0 {
                let b = m.trailing_zeros();
                m &= m - 1;
                if !better(&first, b) {
                    break;
                }
                if let Err(e) = rules[b as usize].eval(FieldRef::of(x), FieldRef::Nil) {
                    first = Some((b, e));
                    break;
                }
            }
        }
        let mut m = self.relations;
        while m != 0 {
            let b = m.trailing_zeros();
            m &= m - 1;
            if !better(&first, b) {
                break;
            }
            let (at, other) = self.fields[b as usize];
            if let Err(e) = rules[b as usize].eval(
                FieldRef::of(field(at as usize)),
                other.map_or(FieldRef::Nil, |o| FieldRef::of(field(o as usize))),
            ) {
                first = Some((b, e));
                break;
            }
        }
        let unheld = self.default_fails & !held;
        if unheld != 0 {
            let b = unheld.trailing_zeros();
            if better(&first, b) {
                let (at, _) = self.fields[b as usize];
                if let Err(e) = rules[b as usize].eval(FieldRef::of(field(at as usize)), FieldRef::Nil) {
                    first = Some((b, e));
                }
            }
        }
        match first {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

/// The constraint fields of `StructuredOutputsParams`, of which exactly one
/// must be non-nil (`json_object: false` counts as set).
pub const CONSTRAINT_FIELDS: [&str; 6] = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];

/// Why a set of structured-output constraint fields is not exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConstraintCount {
    /// No constraint is set.
    None,
    /// Several are set (their names, in field order).
    Many(Vec<&'static str>),
}

/// `StructuredOutputsParams.__post_init__`'s rule on the names of the set
/// constraint fields (`json_object: false` counts as set): exactly one,
/// which is returned.
pub fn exactly_one_constraint(set: &[&'static str]) -> Result<&'static str, ConstraintCount> {
    match set {
        [one] => Ok(one),
        [] => Err(ConstraintCount::None),
        many => Err(ConstraintCount::Many(many.to_vec())),
    }
}

/// `StructuredOutputsParams.__post_init__`: exactly one constraint.
pub fn structured_outputs_params(v: &StructValue) -> Result<(), Violation> {
    let set: Vec<&'static str> = CONSTRAINT_FIELDS.iter().copied().filter(|f| !v.is_nil(f)).collect();
    match exactly_one_constraint(&set) {
        Ok(_) => Ok(()),
        Err(ConstraintCount::None) => Err(Violation::new(
            "",
            format!(
                "exactly one structured-output constraint must be set ({}), got none",
                CONSTRAINT_FIELDS.join(", ")
            ),
        )),
        Err(ConstraintCount::Many(set)) => {
            let message =
                format!("exactly one structured-output constraint must be set, got {}: {}", set.len(), set.join(", "));
            Err(Violation::on_fields(set, message))
        }
    }
}

/// `LoRARequest.__post_init__`: [`LORA_REQUEST_RULES`].
pub fn lora_request(v: &StructValue) -> Result<(), Violation> {
    first_violation_in(v, LORA_REQUEST_RULES)
}

/// `RepetitionDetectionParams.__post_init__` (vllm/sampling_params.py,
/// 0.32.0 to 0.34.0): the pattern sizes non-negative, and the minimum not
/// above the maximum, whether detection is on or off (a `min_pattern_size`
/// of 1 under a `max_pattern_size` of 0 is refused); `min_count` at least 2
/// only when detection is on (`max_pattern_size > 0`), so any `min_count`,
/// negative too, passes with detection off. The
/// `mutant/sp_repetition_detection_*` goldens of those releases' decoder.
pub fn repetition_detection_params(v: &StructValue) -> Result<(), Violation> {
    let int = |name: &str| v.get(name).map(FieldRef::of).and_then(FieldRef::int).unwrap_or(0);
    let (max, min, count) = (int("max_pattern_size"), int("min_pattern_size"), int("min_count"));
    if max < 0 || min < 0 || min > max {
        return Err(Violation::new(
            "",
            format!(
                "max_pattern_size and min_pattern_size must be non-negative, with min_pattern_size <= \
                 max_pattern_size; got {min} and {max}"
            ),
        ));
    }
    if max > 0 && count < 2 {
        return Err(Violation::new("min_count", format!("must be at least 2 when detection is enabled, got {count}")));
    }
    Ok(())
}

/// `SamplingParams.__post_init__` / `_verify_args` as run on decode:
/// [`SAMPLING_PARAMS_RULES`].
pub fn sampling_params(v: &StructValue) -> Result<(), Violation> {
    first_violation_in(v, SAMPLING_PARAMS_RULES)
}

mod json_nesting;
pub mod tokenspeed;
pub use json_nesting::{json_text_past_depth, json_value_nests_deeper_than};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::vllm;

    fn sp(fields: &[(&str, Value)]) -> StructValue {
        let mut v = StructValue::with_defaults(&vllm::SAMPLING_PARAMS);
        for (k, x) in fields {
            v.set(k, x.clone());
        }
        v
    }

    #[test]
    fn integers_above_i64_max_are_compared_as_python_ints() {
        // msgspec gives a Python int up to 2^64 - 1; `min_tokens >
        // max_tokens` and greedy `n > 1` hold for such an int too.
        let big = Value::UInt(u64::MAX);
        let v = sampling_params(&sp(&[("min_tokens", big.clone()), ("max_tokens", Value::Int(16))])).unwrap_err();
        assert_eq!(
            (v.fields.as_slice(), v.message.as_str()),
            (&["min_tokens"][..], "must not exceed max_tokens (16), got 18446744073709551615")
        );
        let v = sampling_params(&sp(&[("n", big), ("temperature", Value::Float(0.0))])).unwrap_err();
        assert_eq!(v.fields, ["n"]);
        assert!(sampling_params(&sp(&[("seed", Value::UInt(u64::MAX))])).is_ok());
    }

    #[test]
    fn the_value_path_and_the_lookup_by_name_give_the_same_first_violation() {
        let cases = [
            sp(&[]),
            sp(&[("top_p", Value::Float(f64::NAN)), ("top_k", Value::Int(-5))]),
            sp(&[("stop", Value::Array(vec![Value::Str(String::new())])), ("detokenize", Value::Bool(false))]),
            sp(&[("stop", Value::Str("x".into())), ("detokenize", Value::Bool(false))]),
            sp(&[("min_tokens", Value::Int(3)), ("max_tokens", Value::Int(2))]),
            // Two fields broken, the one held first (`stop`, field 10)
            // ruled later in vLLM's order (after `max_tokens`'s rule).
            sp(&[("stop", Value::Array(vec![Value::Str(String::new())])), ("max_tokens", Value::Int(0))]),
        ];
        for v in cases {
            assert_eq!(sampling_params(&v), first_violation(&v, SAMPLING_PARAMS_RULES), "{v:?}");
        }
        let two = sp(&[("stop", Value::Array(vec![Value::Str(String::new())])), ("max_tokens", Value::Int(0))]);
        assert_eq!(sampling_params(&two).unwrap_err().fields, ["max_tokens"], "vLLM's order, not the fields'");
    }

    #[test]
    fn the_rule_tables_the_decoder_judges_by_are_indexed() {
        // The decoder's per-request path: resolved once per struct, never
        // the lookup by name.
        assert!(RuleIndex::of(&vllm::SAMPLING_PARAMS).is_some());
        assert!(RuleIndex::of(&vllm::LORA_REQUEST).is_some());
    }

    #[test]
    fn every_rule_that_an_absent_fields_default_breaks_is_judged_not_only_the_first() {
        // A LoRARequest table whose two rules both fail on their defaults
        // (an id defaulting to 0 here): with the id held and valid, the
        // absent path's default still fails.
        let schema = &vllm::LORA_REQUEST;
        let defaults = [Value::Str("a".into()), Value::Int(0), Value::Str(String::new())];
        let ix = RuleIndex::new(schema, &defaults).expect("indexed");
        assert_eq!(ix.default_fails.count_ones(), 2);
        let mut v = StructValue::with_defaults(schema);
        v.set("lora_name", Value::Str("a".into())).set("lora_int_id", Value::Int(5));
        assert_eq!(ix.first_violation(&v, LORA_REQUEST_RULES).unwrap_err().fields, ["lora_path"]);
        v.set("lora_path", Value::Str("/p".into()));
        assert!(ix.first_violation(&v, LORA_REQUEST_RULES).is_ok());
    }

    #[test]
    fn a_check_on_several_fields_names_them_all() {
        let rules = tokenspeed::VERIFY_RULES_AFTER_LOGIT_BIAS;
        let mut v = StructValue::with_defaults(&crate::schema::tokenspeed::SAMPLING_PARAMS);
        v.set("regex", Value::Str("a".into()));
        assert!(first_violation(&v, rules).is_ok());
        v.set("ebnf", Value::Str("b".into()));
        let e = first_violation(&v, rules).unwrap_err();
        assert_eq!(e.fields, ["json_schema", "regex", "ebnf"]);
        assert_eq!(e.path(), "json_schema,regex,ebnf");
    }
}
