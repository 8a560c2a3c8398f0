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
//! Two properties of msgspec structs are not layouts of their own:
//! - a *tagged* `array_like` struct (TokenSpeed's) writes its class name as
//!   element 0, before the fields: [`StructSchema::tag`];
//! - `kw_only` fields with defaults may precede required ones, so the
//!   shortest array a receiver takes ends at the last required field:
//!   [`StructSchema::min_len`] (for every vLLM table the required fields
//!   come first and this is [`StructSchema::required`]).

mod common;
pub mod tokenspeed;
pub mod vllm;

/// An integer enum: its Python class name and the values it defines.
#[derive(Debug)]
pub struct EnumSchema {
    pub name: &'static str,
    pub values: &'static [(i64, &'static str)],
}

impl EnumSchema {
    pub fn contains(&self, v: i64) -> bool {
        self.values.iter().any(|(x, _)| *x == v)
    }
}

/// How a tensor-typed field is declared on the Python side. numpy-typed
/// fields accept numpy dtype strings (`<i4`) and plain names (`int32`);
/// torch-typed fields accept only torch names (`int32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorKind {
    Numpy,
    Torch,
}

/// A field type.
#[derive(Debug)]
pub enum Ty {
    /// Any MessagePack value (`Any` in Python; dicts of unknown shape).
    Any,
    Bool,
    /// A Python `int`: -2^63 ..= 2^64-1 on the wire.
    Int,
    /// A Python `float`: float64 on the wire; float32 and ints accepted.
    Float,
    Str,
    Bytes,
    IntEnum(&'static EnumSchema),
    /// A `Literal[...]` of strings or a string-valued Enum.
    StrLiteral(&'static [&'static str]),
    Optional(&'static Ty),
    List(&'static Ty),
    /// A Python `set`: an array on the wire, unordered.
    Set(&'static Ty),
    Dict(&'static Ty, &'static Ty),
    /// A union of distinct MessagePack kinds (`int | str`, `str | list[str]`).
    Union(&'static [Ty]),
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
    Required,
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
    EmptyList,
    EmptySet,
    EmptyDict,
    /// A fresh instance of the field's struct type with all its defaults
    /// (a `default_factory` of a dataclass).
    NewStruct,
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: &'static Ty,
    pub default: Default,
}

/// A rule vLLM's decoder runs after building the struct (`__post_init__`).
pub type Validator = fn(&crate::value::StructValue) -> Result<(), crate::error::Violation>;

#[derive(Debug)]
pub struct StructSchema {
    /// The Python class name, used as the root of error and drift paths.
    pub name: &'static str,
    pub layout: Layout,
    pub fields: &'static [Field],
    pub validate: Option<Validator>,
    /// Every field's default as a value, built once on first use.
    pub defaults: DefaultValues,
}

/// Lazily built default values of a struct's fields (see
/// [`StructSchema::default_values`]).
#[derive(Debug)]
pub struct DefaultValues(std::sync::OnceLock<Defaults>);

impl DefaultValues {
    /// An empty cell, for the `defaults` field of a table entry. Each use
    /// in a `static` is its own cell, which is the point.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const NEW: DefaultValues = DefaultValues(std::sync::OnceLock::new());
}

/// A struct's defaults, computed once: as values, and as their wire bytes
/// (for positional encoding, where a run of default fields is one copy).
#[derive(Debug)]
pub struct Defaults {
    pub values: Box<[crate::value::Value]>,
    /// The encoding of every field's default, concatenated; field `i` is
    /// `wire[offsets[i]..offsets[i + 1]]`.
    pub wire: Box<[u8]>,
    pub offsets: Box<[u32]>,
    /// `not_encodable[i]`: how many of fields `0..i` have no default
    /// encoding (required fields that cannot be nil), to check a run in O(1).
    pub not_encodable: Box<[u32]>,
}

impl Defaults {
    /// The wire bytes of the defaults of fields `a..b`, if all have one.
    #[inline]
    pub fn wire_run(&self, a: usize, b: usize) -> Option<&[u8]> {
        if self.not_encodable[b] != self.not_encodable[a] {
            return None;
        }
        Some(&self.wire[self.offsets[a] as usize..self.offsets[b] as usize])
    }
}

impl StructSchema {
    /// The default value of every field, in order (nil for required ones).
    #[inline]
    pub fn default_values(&self) -> &[crate::value::Value] {
        &self.defaults().values
    }

    /// Defaults as values and wire bytes, built on first use.
    pub fn defaults(&self) -> &Defaults {
        self.defaults.0.get_or_init(|| {
            let values: Box<[crate::value::Value]> = self.fields.iter().map(crate::value::default_for).collect();
            let mut wire = Vec::new();
            let mut offsets = vec![0u32];
            let mut not_encodable = vec![0u32];
            for (f, v) in self.fields.iter().zip(values.iter()) {
                let bytes = crate::encode::encode_plain(f.ty, v);
                let missing = not_encodable[not_encodable.len() - 1];
                match bytes {
                    Some(b) => {
                        wire.extend_from_slice(&b);
                        not_encodable.push(missing);
                    }
                    None => not_encodable.push(missing + 1),
                }
                offsets.push(wire.len() as u32);
            }
            Defaults {
                values,
                wire: wire.into_boxed_slice(),
                offsets: offsets.into_boxed_slice(),
                not_encodable: not_encodable.into_boxed_slice(),
            }
        })
    }

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
        tokenspeed::TAGS.iter().find(|(s, _)| std::ptr::eq(*s, self)).map(|(_, t)| *t)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// `map16` header whatever the count when the struct has more than 15
    /// fields (msgspec sizes struct map headers by the field count).
    pub fn uses_map16(&self) -> bool {
        self.fields.len() > 15
    }
}

/// The message kinds of one dialect and release.
#[derive(Debug)]
pub struct ReleaseSchema {
    pub dialect: &'static str,
    pub version: &'static str,
    /// Message roots, as `Ty::Struct` so the codec can start from them.
    pub engine_core_request: &'static Ty,
    pub engine_core_outputs: &'static Ty,
    pub utility_output: &'static Ty,
    pub utility_request: &'static Ty,
    pub start_dp_wave: &'static Ty,
    pub ready_response: &'static Ty,
    pub handshake_init: &'static Ty,
    pub handshake_status: &'static Ty,
    /// Nested structs a gateway builds or inspects on their own.
    pub sampling_params: &'static StructSchema,
    pub structured_outputs_params: &'static StructSchema,
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

/// Every vLLM EngineCore release this crate has a table for (the dialect the
/// typed layer, `arbitrary` and the fuzzers cover).
pub static RELEASES: &[&ReleaseSchema] = &[&vllm::V0_32_0, &vllm::V0_33_0];

/// Every release of every dialect this crate has a table for.
pub static ALL_RELEASES: &[&ReleaseSchema] = &[&vllm::V0_32_0, &vllm::V0_33_0, &tokenspeed::V0_1_1];

/// The table for `dialect` at `version`, if there is one.
pub fn release(dialect: &str, version: &str) -> Option<&'static ReleaseSchema> {
    ALL_RELEASES.iter().copied().find(|r| r.dialect == dialect && r.version == version)
}

impl ReleaseSchema {
    /// Whether this is a TokenSpeed table (tagged structs, its own frame
    /// rules and receive path: `crate::message`).
    pub fn is_tokenspeed(&self) -> bool {
        self.dialect == "tokenspeed"
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
