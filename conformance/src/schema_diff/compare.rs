//! The comparison of two dumps, struct by struct, then enums, then request
//! types, each change classified for both directions with the rule that
//! decides it (module docs: positional structs compare by place, keyed ones
//! by name; a retyped field is compatible toward the reader whose type
//! accepts every value of the other's).

use serde_json::Value as Json;

use super::{Change, ChangeKind, DriftRule, DriftVerdict, Encoding, EnumDef, Schema, TypeDef};

/// The changes from `a` to `b`, struct by struct in `b`'s order (removed
/// structs after), then enums, then request types.
pub fn diff(a: &Schema, b: &Schema) -> Vec<Change> {
    let mut out = Vec::new();
    for tb in &b.types {
        match a.types.iter().find(|t| t.name == tb.name) {
            None => out.push(Change {
                path: tb.name.clone(),
                kind: ChangeKind::StructAdded,
                a_reads_b: (DriftVerdict::Compatible, DriftRule::ReachedOnlyThroughFields),
                b_reads_a: (DriftVerdict::Compatible, DriftRule::ReachedOnlyThroughFields),
            }),
            Some(ta) => diff_struct(ta, tb, &mut out),
        }
    }
    for ta in a.types.iter().filter(|t| !b.types.iter().any(|x| x.name == t.name)) {
        out.push(Change {
            path: ta.name.clone(),
            kind: ChangeKind::StructRemoved,
            a_reads_b: (DriftVerdict::Compatible, DriftRule::ReachedOnlyThroughFields),
            b_reads_a: (DriftVerdict::Compatible, DriftRule::ReachedOnlyThroughFields),
        });
    }
    diff_enums(a, b, &mut out);
    diff_request_types(a, b, &mut out);
    out
}

/// A reader's verdict on a field its writer does not have (`default`: the
/// reader's default).
fn absent(default: &Option<Json>) -> (DriftVerdict, DriftRule) {
    match default {
        Some(_) => (DriftVerdict::Compatible, DriftRule::AbsentTakesDefault),
        None => (DriftVerdict::Breaking, DriftRule::AbsentRequiredRefused),
    }
}

/// A reader's verdict on a field only its writer has.
fn extra(enc: Encoding) -> (DriftVerdict, DriftRule) {
    match enc {
        Encoding::ArrayLike => (DriftVerdict::Drift, DriftRule::TrailingElementIgnored),
        Encoding::NamedTuple => (DriftVerdict::Breaking, DriftRule::NamedTupleRefusesExtra),
        Encoding::MapStruct | Encoding::Dataclass => (DriftVerdict::Drift, DriftRule::UnknownKeyIgnored),
    }
}

fn diff_struct(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    if ta.encoding.positional() != tb.encoding.positional() {
        out.push(Change {
            path: tb.name.clone(),
            kind: ChangeKind::EncodingChanged { a: ta.encoding, b: tb.encoding },
            a_reads_b: (DriftVerdict::Breaking, DriftRule::EncodingChanged),
            b_reads_a: (DriftVerdict::Breaking, DriftRule::EncodingChanged),
        });
        return;
    }
    if tb.encoding.positional() {
        diff_positional(ta, tb, out);
    } else {
        diff_keyed(ta, tb, out);
    }
}

/// `Struct.field`, named after release B's struct.
fn field_path(tb: &TypeDef, field: &str) -> String {
    format!("{}.{field}", tb.name)
}

/// A field both releases have (A's `i`-th, B's `j`-th): a changed type, and
/// a changed default, which only a writer that omits defaults leaves to the
/// reader's own.
fn diff_common_field(ta: &TypeDef, tb: &TypeDef, i: usize, j: usize, out: &mut Vec<Change>) {
    let (fa, fb) = (&ta.fields[i], &tb.fields[j]);
    if fa.ty != fb.ty {
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::FieldRetyped { a: fa.ty.clone(), b: fb.ty.clone() },
            a_reads_b: retyped(&fa.ty, &fb.ty),
            b_reads_a: retyped(&fb.ty, &fa.ty),
        });
    }
    if fa.default != fb.default {
        // The writer omits a field equal to its own default; a struct
        // written in full carries every value.
        let read = |writer: &TypeDef| {
            if writer.omit_defaults {
                (DriftVerdict::Breaking, DriftRule::OmittedTakesReadersDefault)
            } else {
                (DriftVerdict::Compatible, DriftRule::DefaultWrittenInFull)
            }
        };
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::DefaultChanged { a: fa.default.clone(), b: fb.default.clone() },
            a_reads_b: read(tb),
            b_reads_a: read(ta),
        });
    }
}

/// Two positional structs: fields compare by place. A new name at a place
/// where neither release has the other's name is a rename (harmless unless
/// the type changed too, the name not being on the wire); a field that
/// keeps its name but changes its place shifts every reader; fields added
/// or removed at the end are extra trailing elements or absent ones.
fn diff_positional(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    let shifted = (DriftVerdict::Breaking, DriftRule::PositionShifted);
    let n = ta.fields.len().min(tb.fields.len());
    let a_has = |name: &str| ta.fields.iter().any(|f| f.name == name);
    let b_has = |name: &str| tb.fields.iter().any(|f| f.name == name);
    // Fields that keep their name but change their place: an insertion
    // or a removal before them (or a reorder).
    let moved: Vec<(usize, usize)> = ta
        .fields
        .iter()
        .enumerate()
        .filter_map(|(i, fa)| tb.fields.iter().position(|fb| fb.name == fa.name).map(|j| (i, j)))
        .filter(|(i, j)| i != j)
        .collect();
    let renamed_at = |i: usize| i < n && !a_has(&tb.fields[i].name) && !b_has(&ta.fields[i].name);
    for i in 0..n {
        let (fa, fb) = (&ta.fields[i], &tb.fields[i]);
        if fa.name == fb.name {
            diff_common_field(ta, tb, i, i, out);
        } else if renamed_at(i) {
            let v = if fa.ty == fb.ty {
                (DriftVerdict::Compatible, DriftRule::PositionalNameNotOnWire)
            } else {
                (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers)
            };
            out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldRenamed { index: i, a: fa.name.clone(), b: fb.name.clone() },
                a_reads_b: v,
                b_reads_a: v,
            });
        }
    }
    for &(i, j) in &moved {
        out.push(Change {
            path: field_path(tb, &tb.fields[j].name),
            kind: ChangeKind::FieldMoved { a: i, b: j },
            a_reads_b: shifted,
            b_reads_a: shifted,
        });
        diff_common_field(ta, tb, i, j, out);
    }
    for (j, fb) in tb.fields.iter().enumerate() {
        if a_has(&fb.name) || renamed_at(j) {
            continue;
        }
        let appended = j >= ta.fields.len() && moved.is_empty();
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::FieldAdded { index: j, appended, default: fb.default.clone() },
            a_reads_b: if appended { extra(tb.encoding) } else { shifted },
            b_reads_a: if appended { absent(&fb.default) } else { shifted },
        });
    }
    for (i, fa) in ta.fields.iter().enumerate() {
        if b_has(&fa.name) || renamed_at(i) {
            continue;
        }
        let trailing = i >= tb.fields.len() && moved.is_empty();
        out.push(Change {
            path: field_path(tb, &fa.name),
            kind: ChangeKind::FieldRemoved { index: i, trailing, default: fa.default.clone() },
            a_reads_b: if trailing { absent(&fa.default) } else { shifted },
            b_reads_a: if trailing { extra(ta.encoding) } else { shifted },
        });
    }
}

/// Two keyed structs (maps, dataclasses): fields compare by name, order
/// free. A key gone at the same place with the same type as a new one is a
/// rename, which drops the value both ways; other keys added or removed are
/// unknown keys or absent ones.
fn diff_keyed(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    let added: Vec<usize> =
        (0..tb.fields.len()).filter(|&j| !ta.fields.iter().any(|f| f.name == tb.fields[j].name)).collect();
    let removed: Vec<usize> =
        (0..ta.fields.len()).filter(|&i| !tb.fields.iter().any(|f| f.name == ta.fields[i].name)).collect();
    for (j, fb) in tb.fields.iter().enumerate() {
        if let Some(i) = ta.fields.iter().position(|f| f.name == fb.name) {
            diff_common_field(ta, tb, i, j, out);
        }
    }
    for &j in &added {
        let fb = &tb.fields[j];
        // A key gone at the same place with the same type: a rename.
        let renamed = removed.iter().copied().find(|&i| i == j && ta.fields[i].ty == fb.ty);
        match renamed {
            Some(i) => out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldRenamed { index: j, a: ta.fields[i].name.clone(), b: fb.name.clone() },
                a_reads_b: (DriftVerdict::Breaking, DriftRule::RenamedKeyDropsValue),
                b_reads_a: (DriftVerdict::Breaking, DriftRule::RenamedKeyDropsValue),
            }),
            None => out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldAdded {
                    index: j,
                    appended: j + 1 == tb.fields.len(),
                    default: fb.default.clone(),
                },
                a_reads_b: extra(tb.encoding),
                b_reads_a: absent(&fb.default),
            }),
        }
    }
    for &i in &removed {
        let fa = &ta.fields[i];
        if added.iter().any(|&j| j == i && tb.fields[j].ty == fa.ty) {
            continue;
        }
        out.push(Change {
            path: field_path(tb, &fa.name),
            kind: ChangeKind::FieldRemoved {
                index: i,
                trailing: i + 1 == ta.fields.len(),
                default: fa.default.clone(),
            },
            a_reads_b: absent(&fa.default),
            b_reads_a: extra(ta.encoding),
        });
    }
}

/// The members of a type string's top-level union (`int | None`).
pub(super) fn members(ty: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
    for c in ty.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            '|' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

/// A reader of type `reader` meeting values of type `writer`.
pub(super) fn retyped(reader: &str, writer: &str) -> (DriftVerdict, DriftRule) {
    let (r, w) = (members(reader), members(writer));
    if w.iter().all(|m| r.contains(m)) {
        (DriftVerdict::Compatible, DriftRule::TypeAcceptsOthers)
    } else {
        (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers)
    }
}

fn diff_enums(a: &Schema, b: &Schema, out: &mut Vec<Change>) {
    for eb in &b.enums {
        let Some(ea) = a.enums.iter().find(|e| e.name == eb.name) else { continue };
        let has = |e: &EnumDef, v: &Json| e.members.iter().any(|(_, x)| x == v);
        for (_, v) in eb.members.iter().filter(|(_, v)| !has(ea, v)) {
            out.push(Change {
                path: format!("enum {}", eb.name),
                kind: ChangeKind::EnumMemberAdded { value: v.clone() },
                a_reads_b: (DriftVerdict::Breaking, DriftRule::UnknownValueRefused),
                b_reads_a: (DriftVerdict::Compatible, DriftRule::KnownValues),
            });
        }
        for (_, v) in ea.members.iter().filter(|(_, v)| !has(eb, v)) {
            out.push(Change {
                path: format!("enum {}", eb.name),
                kind: ChangeKind::EnumMemberRemoved { value: v.clone() },
                a_reads_b: (DriftVerdict::Compatible, DriftRule::KnownValues),
                b_reads_a: (DriftVerdict::Breaking, DriftRule::UnknownValueRefused),
            });
        }
    }
}

fn diff_request_types(a: &Schema, b: &Schema, out: &mut Vec<Change>) {
    let has = |s: &Schema, byte: &str| s.request_types.iter().any(|(_, x)| x == byte);
    for (_, byte) in b.request_types.iter().filter(|(_, x)| !has(a, x)) {
        out.push(Change {
            path: "request types".into(),
            kind: ChangeKind::RequestTypeAdded { byte: byte.clone() },
            a_reads_b: (DriftVerdict::Breaking, DriftRule::UnknownRequestTypeKillsInput),
            b_reads_a: (DriftVerdict::Compatible, DriftRule::KnownValues),
        });
    }
    for (_, byte) in a.request_types.iter().filter(|(_, x)| !has(b, x)) {
        out.push(Change {
            path: "request types".into(),
            kind: ChangeKind::RequestTypeRemoved { byte: byte.clone() },
            a_reads_b: (DriftVerdict::Compatible, DriftRule::KnownValues),
            b_reads_a: (DriftVerdict::Breaking, DriftRule::UnknownRequestTypeKillsInput),
        });
    }
}
