//! The generated direct encoders (`WireType::encode`): positional structs
//! as arrays of the release's field count, named tuples as arrays, sparse
//! maps as the fields that differ from their defaults (`omit_defaults`),
//! full maps and open maps (known keys in declaration order, then the
//! unknown ones kept from decoding).

use std::fmt::Write as _;

use engine_protocol::internal::msgpack::write;
use engine_protocol::schema::{Default as D, Layout};

use crate::model::{UField, UStruct};
use crate::spelling::{bytes_lit, counts_lit, default_bytes, ident, is_optional, key_lit, tys_static};
use crate::structs::{literal_check, set_check};

pub(crate) fn gen_encode(o: &mut String, u: &UStruct) {
    let _ = writeln!(o, "    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {{");
    let _ = writeln!(o, "        let n = rel.pick({});", counts_lit(u));
    for f in &u.fields {
        if let Some(c) = literal_check(u, f) {
            let _ = writeln!(o, "        {c}");
        }
    }
    match u.layout {
        Layout::Positional if u.tag.is_some() => {
            o.push_str("        write::array_len(&mut e.out, (1 + n + self.unknown.len()) as u32);\n");
            let mut tag = Vec::new();
            write::str(&mut tag, u.tag.unwrap_or_default());
            let _ = writeln!(o, "        e.raw({});", bytes_lit(&tag));
        }
        Layout::Positional => o.push_str("        write::array_len(&mut e.out, (n + self.unknown.len()) as u32);\n"),
        Layout::NamedTuple | Layout::Tuple => o.push_str("        write::array_len(&mut e.out, n as u32);\n"),
        Layout::FullMap => o.push_str("        e.struct_map(n, n + self.unknown.len());\n"),
        // One pass: the header's size depends on the field count only
        // (`Enc::struct_map`), so it is written with a count of 0 and
        // patched once the set fields are written.
        Layout::SparseMap => {
            o.push_str(
                "        let header = e.struct_map_placeholder(n);\n        let mut count = self.unknown.len();\n",
            );
        }
        Layout::OpenMap => unreachable!(),
    }
    // Positional structs: a run of two or more absent-able fields (held as
    // `Option`, in every release) is written in one go when all are absent
    // (the common case: an output's optional fields are mostly unset),
    // instead of one test and one byte push per field.
    let mut i = 0;
    while i < u.fields.len() {
        let run = if u.is_map() { 0 } else { u.fields[i..].iter().take_while(|f| u.none_bytes(f).is_some()).count() };
        // The optional fields releases appended at the end (each release
        // has a prefix of them): when all are absent, the release's count
        // of nils in one go.
        let tail = &u.fields[i..];
        let appended_tail = !u.is_map()
            && tail.len() >= 2
            && tail.iter().any(|f| u.partial(f))
            && tail.iter().all(|f| is_optional(f.ty) && f.default == D::Nil && !f.retyped())
            && (0..u.rels.len()).all(|ri| {
                let has: Vec<bool> = tail.iter().map(|f| f.mask & (1 << ri) != 0).collect();
                has.windows(2).all(|w| w[0] || !w[1])
            });
        if appended_tail {
            let counts: Vec<usize> =
                (0..u.rels.len()).map(|ri| tail.iter().filter(|f| f.mask & (1 << ri) != 0).count()).collect();
            let test: Vec<String> = tail.iter().map(|f| format!("self.{}.is_none()", ident(f.name))).collect();
            let _ = writeln!(o, "        if {} {{", test.join("\n            && "));
            // Every release's nils written, the ones past this release's
            // count dropped: two stores, no length-dependent copy.
            let _ = writeln!(o, "            e.raw({});", bytes_lit(&vec![0xc0; tail.len()]));
            let drop: Vec<usize> = counts.iter().map(|c| tail.len() - c).collect();
            if drop.iter().any(|&d| d > 0) {
                let _ = writeln!(o, "            e.out.truncate(e.out.len() - rel.pick(&{drop:?}));");
            }
            gen_encode_fields_otherwise(o, u, tail);
            break;
        }
        if run >= 2 {
            let fields = &u.fields[i..i + run];
            let none: Vec<u8> = fields.iter().flat_map(|f| u.none_bytes(f).unwrap_or_default()).collect();
            let test: Vec<String> = fields.iter().map(|f| format!("self.{}.is_none()", ident(f.name))).collect();
            let _ = writeln!(o, "        if {} {{", test.join("\n            && "));
            let _ = writeln!(o, "            e.raw({});", bytes_lit(&none));
            gen_encode_fields_otherwise(o, u, fields);
            i += run;
        } else {
            gen_encode_field(o, u, &u.fields[i]);
            i += 1;
        }
    }
    match u.layout {
        Layout::Positional => o.push_str("        for x in &self.unknown {\n            e.any(x)?;\n        }\n"),
        Layout::FullMap => o.push_str("        encode_extra_keys(&self.unknown, e)?;\n"),
        Layout::SparseMap => {
            o.push_str("        encode_extra_keys(&self.unknown, e)?;\n        e.patch_struct_map(header, n, count);\n")
        }
        _ => {}
    }
    o.push_str("        Ok(())\n    }\n");
}

/// The `else` branch of a run written in one go when all its fields are
/// absent: each field's own encoder, one level deeper.
pub(crate) fn gen_encode_fields_otherwise(o: &mut String, u: &UStruct, fields: &[UField]) {
    o.push_str("        } else {\n");
    for f in fields {
        let mut one = String::new();
        gen_encode_field(&mut one, u, f);
        o.push_str(&one.replace("\n        ", "\n            ").replacen("        ", "            ", 1));
    }
    o.push_str("        }\n");
}

/// One field of a direct encoder.
pub(crate) fn gen_encode_field(o: &mut String, u: &UStruct, f: &UField) {
    let id = ident(f.name);
    let seg = format!(".{}", f.name);
    let key = if u.is_map() { format!("e.raw({}); ", key_lit(f.name)) } else { String::new() };
    let write_value = if f.retyped() {
        assert!(!u.wrapped(f), "{}.{}: a retyped field held as a default-able Option", u.name, f.name);
        format!("WireType::encode_as(&self.{id}, {}[rel.index()], rel, e).at({seg:?})?", tys_static(u, f))
    } else if u.wrapped(f) {
        format!(
            "match &self.{id} {{ Some(x) => WireType::encode(x, rel, e).at({seg:?})?, None => e.raw({}) }}",
            bytes_lit(&default_bytes(&f.default))
        )
    } else {
        format!("WireType::encode(&self.{id}, rel, e).at({seg:?})?")
    };
    let body = if u.layout == Layout::SparseMap {
        format!("if {} {{ {key}{write_value}; count += 1; }}", set_check(u, f))
    } else {
        format!("{key}{write_value};")
    };
    per_release(o, u, f, &body);
}

/// Writes `body` (one statement on field `f`), only for the releases that
/// have the field when some lack it: for the others a set field is an
/// error.
pub(crate) fn per_release(o: &mut String, u: &UStruct, f: &UField, body: &str) {
    if u.partial(f) {
        let _ = writeln!(
            o,
            "        if rel.is({:#b}) {{\n            {body}\n        }} else if {} {{\n            return Err(not_in_release(rel, {:?}).into());\n        }}",
            f.mask,
            set_check(u, f),
            f.name
        );
    } else {
        let _ = writeln!(o, "        {body}");
    }
}

pub(crate) fn gen_open_map(o: &mut String, u: &UStruct) {
    let n = u.name;
    for f in &u.fields {
        assert!(!u.partial(f), "{n}.{}: open maps with per-release fields are not generated yet", f.name);
    }
    // from_value
    let _ = writeln!(o, "    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {{");
    let _ = writeln!(o, "        let sv = struct_value(v, {n:?})?;");
    for f in &u.fields {
        let _ = writeln!(
            o,
            "        let mut {}: Option<{}> = None;",
            ident(f.name).trim_start_matches("r#"),
            u.field_ty(f)
        );
    }
    o.push_str("        let mut unknown = Vec::new();\n");
    o.push_str("        for (k, x) in sv.open_entries() {\n");
    o.push_str("            let Value::Str(k) = k else { return Err(type_error(\"a str key\", k)) };\n");
    o.push_str("            match k.as_str() {\n");
    for f in &u.fields {
        let var = ident(f.name).trim_start_matches("r#").to_string();
        let mut get =
            format!("WireType::from_value(x, raw_key(raw, {:?}), rel).at({:?})?", f.name, format!(".{}", f.name));
        if u.wrapped(f) {
            get = format!("Some({get})");
        }
        let _ = writeln!(o, "                {:?} => {var} = Some({get}),", f.name);
    }
    o.push_str("                _ => unknown.push((k.clone(), x.clone())),\n            }\n        }\n");
    let _ = writeln!(o, "        Ok({} {{", u.rust);
    for f in &u.fields {
        let var = ident(f.name).trim_start_matches("r#").to_string();
        if f.default == D::Required {
            let _ = writeln!(o, "            {}: {var}.ok_or_else(|| missing({:?}))?,", ident(f.name), f.name);
        } else {
            let _ = writeln!(o, "            {}: {var}.unwrap_or_default(),", ident(f.name));
        }
    }
    o.push_str("            unknown,\n        })\n    }\n");
    // to_value
    let _ = writeln!(o, "    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {{");
    let _ = writeln!(o, "        let s = struct_schema(ty, {n:?})?;");
    let _ = writeln!(o, "        if s.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(s, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut sv = StructValue::with_defaults(s);\n        let m = sv.open_entries_mut();\n");
    for (i, f) in u.fields.iter().enumerate() {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        if u.wrapped(f) {
            let _ = writeln!(
                o,
                "        if let Some(x) = &self.{id} {{\n            m.push((Value::Str({:?}.into()), WireType::to_value(x, unwrap_optional(s.fields[{i}].ty), rel).at({seg:?})?));\n        }}",
                f.name
            );
        } else {
            let _ = writeln!(
                o,
                "        m.push((Value::Str({:?}.into()), WireType::to_value(&self.{id}, s.fields[{i}].ty, rel).at({seg:?})?));",
                f.name
            );
        }
    }
    o.push_str(
        "        for (k, x) in &self.unknown {\n            m.push((Value::Str(k.clone()), x.clone()));\n        }\n",
    );
    o.push_str("        Ok(Value::Struct(sv))\n    }\n");
    // encode
    o.push_str("    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {\n");
    o.push_str("        let mut count = self.unknown.len();\n");
    for f in &u.fields {
        if u.wrapped(f) {
            let _ = writeln!(o, "        count += self.{}.is_some() as usize;", ident(f.name));
        } else {
            o.push_str("        count += 1;\n");
        }
    }
    o.push_str("        write::map_len(&mut e.out, count as u32);\n");
    for f in &u.fields {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        if u.wrapped(f) {
            let _ = writeln!(
                o,
                "        if let Some(x) = &self.{id} {{\n            e.raw({});\n            WireType::encode(x, rel, e).at({seg:?})?;\n        }}",
                key_lit(f.name)
            );
        } else {
            let _ = writeln!(
                o,
                "        e.raw({});\n        WireType::encode(&self.{id}, rel, e).at({seg:?})?;",
                key_lit(f.name)
            );
        }
    }
    o.push_str("        encode_extra_keys(&self.unknown, e)?;\n        Ok(())\n    }\n");
}
