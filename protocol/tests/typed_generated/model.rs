//! The model the generator writes from: each wire struct as the union of
//! its releases' tables ([`UStruct`], [`UField`]), a field carrying the
//! mask of the releases that have it and its position in each. Positional
//! structs merge by position (a field a later release appends keeps its
//! place), map structs by name.

use engine_protocol::schema::{python_type, tokenspeed, Default as D, Layout, StructSchema, Ty};

use crate::spelling::{default_bytes, is_optional, is_rid_union, rust_name, rust_ty};
use crate::Rels;

/// One field of a generated struct: the union over releases.
pub(crate) struct UField {
    pub(crate) name: &'static str,
    pub(crate) ty: &'static Ty,
    pub(crate) default: D,
    /// Bit i: `VLLM_RELEASES[i]` has this field.
    pub(crate) mask: u32,
    /// Its position in each release's struct (0 where absent).
    pub(crate) pos: Vec<usize>,
    /// Its type in each release's struct (`None` where absent).
    pub(crate) tys: Vec<Option<&'static Ty>>,
}

impl UField {
    /// A field some release retypes from `list[int]` to an ndarray (the
    /// prompt's token ids in 0.34.0): held as `TokenIds`, which writes
    /// either form, each release's type picked at encode time.
    pub(crate) fn retyped(&self) -> bool {
        let mut tys = self.tys.iter().flatten();
        let first = tys.next().map(|t| python_type(t));
        tys.any(|t| Some(python_type(t)) != first)
    }
}

/// Whether a type is one of the two forms token ids take.
pub(crate) fn is_token_ids(ty: &Ty) -> bool {
    matches!(strip_ref(ty), Ty::List(Ty::Int) | Ty::Tensor(engine_protocol::schema::TensorKind::Numpy))
}

pub(crate) fn strip_ref(ty: &Ty) -> &Ty {
    match ty {
        Ty::Optional(t) => t,
        t => t,
    }
}

pub(crate) struct UStruct {
    pub(crate) name: &'static str,
    /// The Rust name (the table name unless that is no identifier).
    pub(crate) rust: String,
    /// The msgspec tag written as element 0 (tagged `array_like` structs).
    pub(crate) tag: Option<&'static str>,
    /// The releases this struct is generated over.
    pub(crate) rels: Rels,
    pub(crate) layout: Layout,
    pub(crate) fields: Vec<UField>,
    /// Field count per release (0 where absent).
    pub(crate) counts: Vec<usize>,
    /// The mask of releases that have this struct.
    pub(crate) mask: u32,
}

pub(crate) fn all_mask(rels: Rels) -> u32 {
    (1u32 << rels.len()) - 1
}

pub(crate) fn versions(rels: Rels, mask: u32) -> String {
    rels.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, r)| r.version).collect::<Vec<_>>().join(", ")
}

pub(crate) fn collect(rels: Rels) -> Vec<UStruct> {
    let mut out: Vec<UStruct> = Vec::new();
    for (ri, rel) in rels.iter().enumerate() {
        for s in rel.structs() {
            if s.name == tokenspeed::NOT_IN_DIALECT.name {
                continue;
            }
            let at = match out.iter().position(|u| u.name == s.name) {
                Some(at) => at,
                None => {
                    out.push(UStruct {
                        name: s.name,
                        rust: rust_name(s.name),
                        tag: s.tag(),
                        rels,
                        layout: s.layout,
                        fields: Vec::new(),
                        counts: vec![0; rels.len()],
                        mask: 0,
                    });
                    out.len() - 1
                }
            };
            let u = &mut out[at];
            if u.mask & (1 << ri) != 0 {
                continue;
            }
            assert_eq!(u.layout, s.layout, "{} changes layout between releases", s.name);
            assert_eq!(u.tag, s.tag(), "{} changes its tag between releases", s.name);
            u.mask |= 1 << ri;
            u.counts[ri] = s.fields.len();
            if matches!(s.layout, Layout::FullMap | Layout::SparseMap | Layout::OpenMap) {
                merge_by_name(u, s, ri);
            } else {
                merge(u, s, ri);
            }
        }
    }
    out
}

/// Adds a release's fields; each release's fields must be a prefix of the
/// union (releases so far only append fields), which keeps positional
/// indices equal across releases.
pub(crate) fn merge(u: &mut UStruct, s: &'static StructSchema, ri: usize) {
    for (i, f) in s.fields.iter().enumerate() {
        match u.fields.get_mut(i) {
            Some(uf) => {
                assert_eq!(uf.name, f.name, "{}: field {i} renamed between releases", s.name);
                let token_ids = is_token_ids(uf.ty) && is_token_ids(f.ty) && is_optional(uf.ty) == is_optional(f.ty);
                assert!(
                    rust_ty(uf.ty) == rust_ty(f.ty) || token_ids,
                    "{}.{}: Rust type changes between releases ({} to {}): give the pair a Rust type that writes both",
                    s.name,
                    f.name,
                    python_type(uf.ty),
                    python_type(f.ty)
                );
                assert_eq!(uf.default, f.default, "{}.{}: default changes between releases", s.name, f.name);
                uf.mask |= 1 << ri;
                uf.pos[ri] = i;
                uf.tys[ri] = Some(f.ty);
            }
            None => u.fields.push(new_field(f, u.rels.len(), ri, i)),
        }
    }
}

pub(crate) fn new_field(f: &'static engine_protocol::schema::Field, n: usize, ri: usize, i: usize) -> UField {
    let mut pos = vec![0; n];
    pos[ri] = i;
    let mut tys = vec![None; n];
    tys[ri] = Some(f.ty);
    UField { name: f.name, ty: f.ty, default: f.default, mask: 1 << ri, pos, tys }
}

/// Adds a release's fields to a map struct, matched by name: the keys are
/// written in each release's own order, so a field one release has where
/// another has a different one (TokenSpeed's ready response: `block_size`
/// became `prefix_granularity` in its place) is a field of its own, placed
/// after the release's previous field. Each release's fields stay in its
/// order within the union.
pub(crate) fn merge_by_name(u: &mut UStruct, s: &'static StructSchema, ri: usize) {
    let mut after: Option<usize> = None;
    for (i, f) in s.fields.iter().enumerate() {
        let at = match u.fields.iter().position(|uf| uf.name == f.name) {
            Some(at) => {
                let uf = &mut u.fields[at];
                assert_eq!(rust_ty(uf.ty), rust_ty(f.ty), "{}.{}: Rust type changes between releases", s.name, f.name);
                assert_eq!(uf.default, f.default, "{}.{}: default changes between releases", s.name, f.name);
                assert!(after.is_none_or(|a| a < at), "{}.{}: key order changes between releases", s.name, f.name);
                uf.mask |= 1 << ri;
                uf.pos[ri] = i;
                uf.tys[ri] = Some(f.ty);
                at
            }
            None => {
                let at = after.map_or(0, |a| a + 1);
                u.fields.insert(at, new_field(f, u.rels.len(), ri, i));
                at
            }
        };
        after = Some(at);
    }
}

impl UStruct {
    pub(crate) fn partial(&self, f: &UField) -> bool {
        f.mask != self.mask
    }

    /// Held as `Option<T>` though the table type is not optional: `None`
    /// stands for the default (or for absence from the release or map).
    pub(crate) fn wrapped(&self, f: &UField) -> bool {
        !is_optional(f.ty)
            && (self.partial(f) || f.default == D::Nil || (self.layout == Layout::OpenMap && f.default != D::Required))
    }

    /// The bytes an absent field is written as, when the field is held as
    /// an `Option` in every release (`nil`, or the default for a wrapped
    /// field); `None` for a field that is always set or per-release.
    pub(crate) fn none_bytes(&self, f: &UField) -> Option<Vec<u8>> {
        if self.partial(f) || is_rid_union(f) {
            None
        } else if is_optional(f.ty) {
            Some(vec![0xc0])
        } else if self.wrapped(f) {
            Some(default_bytes(&f.default))
        } else {
            None
        }
    }

    pub(crate) fn field_ty(&self, f: &UField) -> String {
        if is_rid_union(f) {
            return "Option<Rid>".into();
        }
        if f.retyped() {
            return if is_optional(f.ty) { "Option<TokenIds>".into() } else { "TokenIds".into() };
        }
        if self.wrapped(f) {
            format!("Option<{}>", rust_ty(f.ty))
        } else {
            rust_ty(f.ty)
        }
    }

    /// 1 for a tagged struct (its tag is wire element 0), else 0.
    pub(crate) fn tag_len(&self) -> usize {
        usize::from(self.tag.is_some())
    }

    pub(crate) fn is_map(&self) -> bool {
        matches!(self.layout, Layout::SparseMap | Layout::FullMap | Layout::OpenMap)
    }

    pub(crate) fn has_unknown(&self) -> bool {
        matches!(self.layout, Layout::Positional | Layout::SparseMap | Layout::FullMap | Layout::OpenMap)
    }
}
