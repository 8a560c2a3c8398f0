//! The generated struct declarations and their conversions to and from
//! the dynamic `Value` tree (`from_value` reading by table position or
//! key per release, `to_value` writing the release's table, `Literal`
//! fields checked on the way).

use std::fmt::Write as _;

use engine_protocol::schema::{Layout, Ty};

use crate::encoder::{gen_encode, gen_open_map, per_release};
use crate::model::{all_mask, versions, UField, UStruct};
use crate::spelling::{
    counts_lit, default_expr, default_lit, doc_type, ident, is_optional, layout_doc, strip, ty_code, tys_static,
};

pub(crate) fn gen_struct(o: &mut String, u: &UStruct) {
    let n = u.rust.as_str();
    let _ = writeln!(o, "\n/// `{}`: {}.", u.name, layout_doc(u.layout));
    if let Some(tag) = u.tag {
        let _ = writeln!(o, "///\n/// Tagged: element 0 of the array is the tag `{tag:?}`, the fields follow.");
    }
    if u.mask != all_mask(u.rels) {
        let _ = writeln!(o, "///\n/// Releases: {}.", versions(u.rels, u.mask));
    }
    let _ = writeln!(o, "#[derive(Debug, Clone, PartialEq)]\npub struct {n} {{");
    for f in &u.fields {
        let _ = writeln!(o, "    /// {}", doc_type(u, f));
        let _ = writeln!(o, "    pub {}: {},", ident(f.name), u.field_ty(f));
    }
    if u.has_unknown() {
        if u.is_map() {
            let _ = writeln!(
                o,
                "    /// Keys this crate's tables do not know (a newer release's fields),\n    \
                 /// in wire order; written back after the known ones."
            );
            let _ = writeln!(o, "    pub unknown: Vec<(String, Value)>,");
        } else {
            let _ = writeln!(
                o,
                "    /// Trailing elements this crate's tables do not know (a newer\n    \
                 /// release's fields); written back after the known ones."
            );
            let _ = writeln!(o, "    pub unknown: Vec<Value>,");
        }
    }
    o.push_str("}\n");

    // Default
    let _ = writeln!(o, "\nimpl Default for {n} {{\n    fn default() -> Self {{\n        {n} {{");
    for f in &u.fields {
        let _ = writeln!(o, "            {}: {},", ident(f.name), default_expr(u, f));
    }
    if u.has_unknown() {
        o.push_str("            unknown: Vec::new(),\n");
    }
    o.push_str("        }\n    }\n}\n");

    for f in u.fields.iter().filter(|f| f.retyped()) {
        let tys: Vec<String> =
            f.tys.iter().map(|t| t.map_or("&Ty::Any".to_string(), |t| format!("&{}", ty_code(t)))).collect();
        let _ = writeln!(
            o,
            "\n/// `{}.{}`'s type in each release, for `encode_as`.\nstatic {}: [&Ty; {}] = [{}];",
            u.name,
            f.name,
            tys_static(u, f),
            tys.len(),
            tys.join(", ")
        );
    }
    let _ = writeln!(o, "\nimpl WireType for {n} {{");
    if u.layout == Layout::OpenMap {
        gen_open_map(o, u);
    } else {
        gen_from_value(o, u);
        gen_to_value(o, u);
        gen_encode(o, u);
    }
    o.push_str("}\n");
}

pub(crate) fn gen_from_value(o: &mut String, u: &UStruct) {
    let n = u.name;
    let _ = writeln!(o, "    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {{");
    let _ = writeln!(o, "        let sv = struct_value(v, {n:?})?;");
    let _ = writeln!(o, "        if sv.schema.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(sv.schema, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut it = sv.schema.fields.iter().zip(sv.fields());\n");
    let _ = writeln!(o, "        Ok({} {{", u.rust);
    for (i, f) in u.fields.iter().enumerate() {
        let raw = if u.is_map() {
            format!("raw_key(raw, {:?})", f.name)
        } else {
            format!("raw_at(raw, {})", i + u.tag_len())
        };
        let mut get = format!(
            "WireType::from_value(next_field(&mut it, {:?})?, {raw}, rel).at({:?})?",
            f.name,
            format!(".{}", f.name)
        );
        if u.wrapped(f) {
            get = format!("Some({get})");
        }
        if u.partial(f) {
            let _ = writeln!(o, "            {}: if rel.is({:#b}) {{ {get} }} else {{ None }},", ident(f.name), f.mask);
        } else {
            let _ = writeln!(o, "            {}: {get},", ident(f.name));
        }
    }
    if u.has_unknown() {
        if u.is_map() {
            o.push_str("            unknown: raw_extra_keys(raw, sv.schema),\n");
        } else {
            if u.tag.is_some() {
                o.push_str("            unknown: raw_extra_elements(raw, sv.schema.fields.len() + 1),\n");
            } else {
                o.push_str("            unknown: raw_extra_elements(raw, sv.schema.fields.len()),\n");
            }
        }
    }
    o.push_str("        })\n    }\n");
}

pub(crate) fn set_check(u: &UStruct, f: &UField) -> String {
    let id = ident(f.name);
    if u.wrapped(f) {
        format!("matches!(&self.{id}, Some(x) if !x.is_default(&{}))", default_lit(&f.default))
    } else {
        format!("!self.{id}.is_default(&{})", default_lit(&f.default))
    }
}

pub(crate) fn gen_to_value(o: &mut String, u: &UStruct) {
    let n = u.name;
    let _ = writeln!(o, "    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {{");
    let _ = writeln!(o, "        let s = struct_schema(ty, {n:?})?;");
    let _ = writeln!(o, "        if s.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(s, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut f: Vec<Value> = Vec::with_capacity(s.fields.len());\n");
    for (i, f) in u.fields.iter().enumerate() {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        let i = table_index(u, f, i);
        let conv = if u.wrapped(f) {
            format!(
                "match &self.{id} {{ Some(x) => WireType::to_value(x, s.fields[{i}].ty, rel).at({seg:?})?, None => crate::value::default_for(&s.fields[{i}]) }}"
            )
        } else {
            format!("WireType::to_value(&self.{id}, s.fields[{i}].ty, rel).at({seg:?})?")
        };
        per_release(o, u, f, &format!("f.push({conv});"));
    }
    o.push_str("        Ok(Value::Struct(StructValue::new(s, f)))\n    }\n");
}

/// The field's index in the release's table: `i` (its place in the union)
/// where every release that has it agrees, else picked per release.
pub(crate) fn table_index(u: &UStruct, f: &UField, i: usize) -> String {
    let mine = |ri: usize| f.mask & (1 << ri) != 0;
    if (0..u.rels.len()).all(|ri| !mine(ri) || f.pos[ri] == i) {
        i.to_string()
    } else {
        format!("rel.pick(&{:?})", f.pos)
    }
}

pub(crate) fn literal_check(u: &UStruct, f: &UField) -> Option<String> {
    let Ty::StrLiteral(xs) = strip(f.ty) else { return None };
    let id = ident(f.name);
    let arg =
        if is_optional(f.ty) || u.wrapped(f) { format!("self.{id}.as_deref()") } else { format!("Some(&self.{id})") };
    Some(format!("check_literal({arg}, &{xs:?}).at({:?})?;", format!(".{}", f.name)))
}
