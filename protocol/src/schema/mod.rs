//! Schemas as data: one table per engine release.
//!
//! A schema names every wire struct of a release, its encoding (positional
//! array, sparse omit-defaults map, full dataclass map, named tuple), and per
//! field its Python attribute name, type and default, in declaration order.
//! The codec (`decode`, `encode`) and the canonical view (`view`) are written
//! once against these tables; supporting another release means adding a table
//! (and goldens), not new code paths.
//!
//! Field orders, types and defaults come from vLLM's own classes as installed
//! from PyPI (dumped with `golden/generate/generate.py --schema-dump` into
//! `golden/generate/schema/`, and cross-checked by the `schema_tables` test),
//! and from docs/wire-protocol.md §4, §7, §8 (layouts: §5.1). TokenSpeed's
//! tables (`tokenspeed`) come from TokenSpeed's classes the same way
//! (docs/tokenspeed-wire.md).
//!
//! The tables are pure data: this module imports nothing of the crate
//! above it. Which decoder rules apply to a struct is a data tag
//! ([`Rules`], interpreted by the validation layer); what the codec
//! computes from a table (defaults as values and as wire bytes, resolved
//! rule tables) is cached by the layer that computes it, keyed by the
//! struct's identity (`crate::registry`), never in the entry.
//!
//! Two properties of msgspec structs are not layouts of their own:
//! - a *tagged* `array_like` struct (TokenSpeed's) writes its class name as
//!   element 0, before the fields: [`StructSchema::tag`];
//! - `kw_only` fields with defaults may precede required ones, so the
//!   shortest array a receiver takes ends at the last required field:
//!   [`StructSchema::min_len`] (for every vLLM table the required fields
//!   come first and this is [`StructSchema::required`]).
#![warn(missing_docs)]

mod common;
pub mod tokenspeed;
pub mod vllm;

/// An integer enum: its Python class name and the values it defines.
#[derive(Debug)]
pub struct EnumSchema {
    /// The Python class name.
    pub name: &'static str,
    /// `(value, member name)`, in definition order.
    pub values: &'static [(i64, &'static str)],
}

impl EnumSchema {
    /// Whether `v` is one of the enum's values.
    pub fn contains(&self, v: i64) -> bool {
        self.values.iter().any(|(x, _)| *x == v)
    }
}

/// How a tensor-typed field is declared on the Python side. numpy-typed
/// fields accept numpy dtype strings (`<i4`) and plain names (`int32`);
/// torch-typed fields accept only torch names (`int32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorKind {
    /// A `numpy.ndarray` field.
    Numpy,
    /// A `torch.Tensor` field.
    Torch,
}

/// A field type.
#[derive(Debug)]
pub enum Ty {
    /// Any MessagePack value (`Any` in Python; dicts of unknown shape).
    Any,
    /// A Python `bool`.
    Bool,
    /// A Python `int`: -2^63 ..= 2^64-1 on the wire.
    Int,
    /// A Python `float`: float64 on the wire; float32 and ints accepted.
    Float,
    /// A Python `str` (UTF-8 on the wire).
    Str,
    /// Python `bytes` (bin on the wire).
    Bytes,
    /// An `IntEnum` (an int on the wire, one of the enum's values).
    IntEnum(&'static EnumSchema),
    /// A `Literal[...]` of strings or a string-valued Enum.
    StrLiteral(&'static [&'static str]),
    /// `T | None`.
    Optional(&'static Ty),
    /// A Python `list` (an array on the wire).
    List(&'static Ty),
    /// A Python `set`: an array on the wire, unordered.
    Set(&'static Ty),
    /// A Python `dict` (a map on the wire), key and value types.
    Dict(&'static Ty, &'static Ty),
    /// A union of distinct MessagePack kinds (`int | str`, `str | list[str]`).
    Union(&'static [Ty]),
    /// A nested struct.
    Struct(&'static StructSchema),
    /// `[dtype, shape, data]` with data inline (ext 3) or an aux-frame index.
    Tensor(TensorKind),
    /// vLLM's `UtilityResult`: `[type_info | nil, value]` on the wire.
    UtilityResult,
    /// Multimodal `NestedTensors`: a torch tensor triple, a number, or a list
    /// of those (a 3-array whose first element is a string is a tensor).
    NestedTensors,
}

/// The wire shape of a struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// msgspec `array_like=True`: every field written, in order. Decoding
    /// needs at least `required` elements, fills missing trailing defaults
    /// and ignores (reports) extra trailing elements.
    Positional,
    /// `NamedTuple`: positional, missing trailing defaults filled, extra
    /// elements rejected (vLLM's decoder does so for `LogprobsLists`).
    NamedTuple,
    /// A plain list unpacked into a fixed number of names by vLLM
    /// (`client_idx, call_id, method, args = payload`): exactly that many
    /// elements; the view is the JSON array.
    Tuple,
    /// msgspec Struct with `omit_defaults=True`: a map holding only the fields
    /// whose value differs from the default.
    SparseMap,
    /// A dataclass or plain Struct: a map of every field.
    FullMap,
    /// A plain dict with a few known keys (handshake HELLO/READY): the view
    /// is the dict as sent, in wire order.
    OpenMap,
}

/// A field default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// No default: the field must be present.
    Required,
    /// `None`.
    Nil,
    /// A bool.
    Bool(bool),
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'static str),
    /// `[]` (a `default_factory=list`).
    EmptyList,
    /// `set()`.
    EmptySet,
    /// `{}`.
    EmptyDict,
    /// A fresh instance of the field's struct type with all its defaults
    /// (a `default_factory` of a dataclass).
    NewStruct,
}

#[derive(Debug, Clone, Copy)]
/// One field of a struct: its Python attribute name, type and default.
pub struct Field {
    /// The Python attribute name (the key of a map layout).
    pub name: &'static str,
    /// Its type.
    pub ty: &'static Ty,
    /// Its default.
    pub default: Default,
}

/// Which of the rules vLLM's (or TokenSpeed's) decoder runs after building
/// a struct (`__post_init__`) applies to it: a data tag, interpreted by
/// `crate::validate::check` (the rules themselves, as data where they are
/// ranges, live in `crate::validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rules {
    /// vLLM's `SamplingParams.__post_init__` / `_verify_args` (0.24.0 on).
    SamplingParams,
    /// vLLM's `StructuredOutputsParams.__post_init__`: exactly one constraint.
    StructuredOutputsParams,
    /// vLLM's `LoRARequest.__post_init__`.
    LoraRequest,
    /// vLLM's `RepetitionDetectionParams.__post_init__`.
    RepetitionDetectionParams,
    /// TokenSpeed's handshake rule on INIT (at least one input and one
    /// output address).
    TokenSpeedHandshakeInit,
    /// vLLM 0.23.0's `SamplingParams` rules (looser `temperature` and
    /// `repetition_penalty` checks). Variants are appended, never inserted:
    /// their discriminants are part of the public API.
    SamplingParams0_23,
    /// vLLM 0.22's `SamplingParams` rules (0.23.0's, without
    /// `thinking_token_budget`'s).
    SamplingParams0_22,
}

/// One wire struct of a table.
#[derive(Debug)]
pub struct StructSchema {
    /// The Python class name, used as the root of error and drift paths.
    pub name: &'static str,
    /// How the struct is laid out on the wire.
    pub layout: Layout,
    /// Every field, in declaration order.
    pub fields: &'static [Field],
    /// The decoder's rules for this struct, if any.
    pub validate: Option<Rules>,
    /// The msgspec tag a tagged `array_like` struct writes as element 0 of
    /// its array, before the fields (docs/tokenspeed-wire.md §3; msgspec's
    /// default tag is the class name); `None` for untagged structs.
    pub tag: Option<&'static str>,
}

impl StructSchema {
    /// Number of leading fields without a default.
    pub fn required(&self) -> usize {
        self.fields.iter().take_while(|f| f.default == Default::Required).count()
    }

    /// The fewest fields a positional encoding may carry: up to and
    /// including the last field without a default (not counting a tag).
    pub fn min_len(&self) -> usize {
        self.fields.iter().rposition(|f| f.default == Default::Required).map_or(0, |i| i + 1)
    }

    /// The msgspec tag a tagged `array_like` struct writes as element 0 of
    /// its array (docs/tokenspeed-wire.md §3); `None` for untagged structs.
    #[inline]
    pub fn tag(&self) -> Option<&'static str> {
        self.tag
    }

    /// The position of field `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// `map16` header whatever the count when the struct has more than 15
    /// fields (msgspec sizes struct map headers by the field count).
    pub fn uses_map16(&self) -> bool {
        self.fields.len() > 15
    }
}

/// An engine family whose wire this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Dialect {
    /// vLLM EngineCore (docs/wire-protocol.md).
    Vllm,
    /// TokenSpeed's `--zmq-msgpack` scheduler wire (docs/tokenspeed-wire.md).
    TokenSpeed,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 2] = [Dialect::Vllm, Dialect::TokenSpeed];

    /// Its name in case files and reports (`vllm`, `tokenspeed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Vllm => "vllm",
            Dialect::TokenSpeed => "tokenspeed",
        }
    }

    /// Every release of this dialect this crate has a table for.
    pub fn releases(self) -> &'static [&'static ReleaseSchema] {
        match self {
            Dialect::Vllm => VLLM_TABLES,
            Dialect::TokenSpeed => TOKENSPEED_RELEASES,
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dialect name this crate does not know (`"dialect"` of a case file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDialect {
    /// The name given.
    pub name: String,
}

impl std::fmt::Display for UnknownDialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
        write!(f, "unknown dialect `{}` (known: {})", self.name, known.join(", "))
    }
}

impl std::error::Error for UnknownDialect {}

impl std::str::FromStr for Dialect {
    type Err = UnknownDialect;

    /// From its name in case files (`vllm`, `tokenspeed`).
    fn from_str(s: &str) -> Result<Dialect, UnknownDialect> {
        Dialect::ALL.into_iter().find(|d| d.as_str() == s).ok_or_else(|| UnknownDialect { name: s.to_string() })
    }
}

/// A release this crate has no table for: the dialect and version asked
/// for, and the versions of that dialect there are tables for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRelease {
    /// The dialect asked for.
    pub dialect: Dialect,
    /// The version asked for.
    pub version: String,
    /// The versions of `dialect` with a table.
    pub known: Vec<&'static str>,
}

impl std::fmt::Display for UnknownRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no schema table for {} {} (tables: {})", self.dialect, self.version, self.known.join(", "))
    }
}

impl std::error::Error for UnknownRelease {}

/// The message kinds of one dialect and release.
#[derive(Debug)]
pub struct ReleaseSchema {
    /// The engine family.
    pub dialect: Dialect,
    /// The engine release (`0.33.0`).
    pub version: &'static str,
    /// Message roots, as `Ty::Struct` so the codec can start from them.
    pub engine_core_request: &'static Ty,
    /// The output batch (`EngineCoreOutputs`).
    pub engine_core_outputs: &'static Ty,
    /// A utility call's answer.
    pub utility_output: &'static Ty,
    /// A utility call.
    pub utility_request: &'static Ty,
    /// `START_DP_WAVE`'s payload.
    pub start_dp_wave: &'static Ty,
    /// The ready response of the handshake.
    pub ready_response: &'static Ty,
    /// The handshake's INIT message.
    pub handshake_init: &'static Ty,
    /// The handshake's HELLO / READY dicts.
    pub handshake_status: &'static Ty,
    /// Nested structs a gateway builds or inspects on their own:
    /// `SamplingParams`.
    pub sampling_params: &'static StructSchema,
    /// `StructuredOutputsParams`.
    pub structured_outputs_params: &'static StructSchema,
    /// One request's output step (`EngineCoreOutput`).
    pub engine_core_output: &'static StructSchema,
}

impl Ty {
    /// The struct schema of a `Ty::Struct` (through `Optional`).
    pub fn as_struct(&self) -> Option<&'static StructSchema> {
        match self {
            Ty::Struct(s) => Some(s),
            Ty::Optional(t) => t.as_struct(),
            _ => None,
        }
    }
}

/// vLLM 0.32.0's table, typed (no version string to mistype):
/// `release(Dialect::Vllm, "0.32.0")` returns the same.
///
/// ```
/// use engine_protocol::{release, Dialect, VLLM_0_33_0};
/// assert!(std::ptr::eq(VLLM_0_33_0, release(Dialect::Vllm, "0.33.0").unwrap()));
/// let e = release(Dialect::Vllm, "0.35.0").unwrap_err();
/// assert!(e.to_string().starts_with("no schema table for vllm 0.35.0 (tables: 0.22.0, 0.22.1,"), "{e}");
/// assert!(e.to_string().ends_with("0.31.0, 0.32.0, 0.33.0, 0.34.0)"), "{e}");
/// ```
pub static VLLM_0_32_0: &ReleaseSchema = &vllm::V0_32_0;
/// vLLM 0.33.0's table.
pub static VLLM_0_33_0: &ReleaseSchema = &vllm::V0_33_0;
/// vLLM 0.34.0's table (generated from its schema dump): the prompt's
/// token ids as an int32 ndarray (docs/wire-protocol.md §6.9).
pub static VLLM_0_34_0: &ReleaseSchema = &vllm::V0_34_0;
/// TokenSpeed 0.1.1's table.
pub static TOKENSPEED_0_1_1: &ReleaseSchema = &tokenspeed::V0_1_1;
/// The table of TokenSpeed's main branch at git 57b49061 (its 08-03 wire).
pub static TOKENSPEED_GIT_57B49061: &ReleaseSchema = &tokenspeed::GIT_57B49061;

/// The vLLM EngineCore releases the typed API, `arbitrary` and the fuzzers
/// cover, oldest first (every release with a table: [`VLLM_TABLES`]).
pub static VLLM_RELEASES: &[&ReleaseSchema] = &[&vllm::V0_32_0, &vllm::V0_33_0, &vllm::V0_34_0];

/// Every vLLM EngineCore release this crate has a table for, oldest first:
/// 0.32.0 and 0.33.0 written by hand, every other generated from its
/// schema dump (`vllm::V0_22_1` ..., `vllm::V0_34_0`). The value codec,
/// `verify` and the runner take any of them.
pub static VLLM_TABLES: &[&ReleaseSchema] = &vllm::TABLES;

/// Every TokenSpeed release this crate has a table for, oldest first.
pub static TOKENSPEED_RELEASES: &[&ReleaseSchema] = &[&tokenspeed::GIT_57B49061, &tokenspeed::V0_1_1];

/// Every release of every dialect this crate has a table for.
pub static ALL_RELEASES: &[&ReleaseSchema] = &vllm::EVERY_RELEASE;

/// The table for `dialect` at `version`; the error names what was asked
/// for and the versions there are tables for.
pub fn release(dialect: Dialect, version: &str) -> Result<&'static ReleaseSchema, UnknownRelease> {
    let releases = dialect.releases();
    releases.iter().copied().find(|r| r.version == version).ok_or_else(|| UnknownRelease {
        dialect,
        version: version.to_string(),
        known: releases.iter().map(|r| r.version).collect(),
    })
}

impl ReleaseSchema {
    /// Whether this is a TokenSpeed table (tagged structs, its own frame
    /// rules and receive path: `crate::message`).
    pub fn is_tokenspeed(&self) -> bool {
        self.dialect == Dialect::TokenSpeed
    }

    /// Every struct reachable from this release's message roots, each once,
    /// in discovery order.
    pub fn structs(&self) -> Vec<&'static StructSchema> {
        let mut out: Vec<&'static StructSchema> = Vec::new();
        let roots = [
            self.engine_core_request,
            self.engine_core_outputs,
            self.utility_output,
            self.utility_request,
            self.start_dp_wave,
            self.ready_response,
            self.handshake_init,
            self.handshake_status,
        ];
        fn walk(ty: &'static Ty, out: &mut Vec<&'static StructSchema>) {
            match ty {
                Ty::Optional(t) | Ty::List(t) | Ty::Set(t) => walk(t, out),
                Ty::Dict(k, v) => {
                    walk(k, out);
                    walk(v, out);
                }
                Ty::Union(ms) => ms.iter().for_each(|m| walk(m, out)),
                Ty::Struct(s) => {
                    if out.iter().any(|o| std::ptr::eq(*o, *s)) {
                        return;
                    }
                    out.push(s);
                    for f in s.fields {
                        walk(f.ty, out);
                    }
                }
                _ => {}
            }
        }
        for r in roots {
            walk(r, &mut out);
        }
        out
    }
}

/// A Python-style rendering of a type (`list[int] | None`), as in the schema
/// dumps of `golden/generate/schema/`.
pub fn python_type(ty: &Ty) -> String {
    match ty {
        Ty::Any => "any".into(),
        Ty::Bool => "bool".into(),
        Ty::Int => "int".into(),
        Ty::Float => "float".into(),
        Ty::Str => "str".into(),
        Ty::Bytes => "bytes".into(),
        Ty::IntEnum(e) => format!("enum {}", e.name),
        Ty::StrLiteral(xs) => {
            format!("Literal[{}]", xs.iter().map(|x| format!("'{x}'")).collect::<Vec<_>>().join(", "))
        }
        Ty::Optional(t) => format!("{} | None", python_type(t)),
        Ty::List(t) => format!("list[{}]", python_type(t)),
        Ty::Set(t) => format!("set[{}]", python_type(t)),
        Ty::Dict(k, v) => format!("dict[{}, {}]", python_type(k), python_type(v)),
        Ty::Union(ms) => ms.iter().map(python_type).collect::<Vec<_>>().join(" | "),
        Ty::Struct(s) => s.name.into(),
        Ty::Tensor(TensorKind::Numpy) => "numpy.ndarray".into(),
        Ty::Tensor(TensorKind::Torch) => "torch.Tensor".into(),
        Ty::UtilityResult => "UtilityResult".into(),
        Ty::NestedTensors => "NestedTensors".into(),
    }
}
