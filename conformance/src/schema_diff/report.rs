//! The changes as a report: text (one per line), JSON, Markdown, and the
//! worst verdict of a list.

use serde_json::{json, Value as Json};

use super::{Change, DriftRule, DriftVerdict};

/// The changes as text, one per line.
pub fn text(a: &str, b: &str, changes: &[Change]) -> String {
    let mut s = format!("{} changes from {a} to {b}\n", changes.len());
    for c in changes {
        s.push_str(&format!(
            "{}: {} {} | {a} reads {b}: {} ({}) | {b} reads {a}: {} ({})\n",
            c.path,
            c.kind.name(),
            c.kind.detail(),
            c.a_reads_b.0.as_str(),
            c.a_reads_b.1.describe(),
            c.b_reads_a.0.as_str(),
            c.b_reads_a.1.describe()
        ));
    }
    s
}

/// The changes as JSON.
pub fn to_json(a: &str, b: &str, changes: &[Change]) -> Json {
    let side = |(v, r): (DriftVerdict, DriftRule)| json!({"verdict": v.as_str(), "rule": r.describe()});
    json!({
        "a": a,
        "b": b,
        "changes": changes.iter().map(|c| json!({
            "path": c.path,
            "change": c.kind.name(),
            "detail": c.kind.detail(),
            "a_reads_b": side(c.a_reads_b),
            "b_reads_a": side(c.b_reads_a),
        })).collect::<Vec<_>>(),
    })
}

/// The changes as a Markdown table.
pub fn markdown(a: &str, b: &str, changes: &[Change]) -> String {
    let mut s = format!("| where | change | {a} reads {b} | {b} reads {a} |\n| --- | --- | --- | --- |\n");
    for c in changes {
        s.push_str(&format!(
            "| `{}` | {}: {} | {} ({}) | {} ({}) |\n",
            c.path,
            c.kind.name(),
            c.kind.detail().replace('|', "\\|"),
            c.a_reads_b.0.as_str(),
            c.a_reads_b.1.describe(),
            c.b_reads_a.0.as_str(),
            c.b_reads_a.1.describe()
        ));
    }
    s
}

/// The worst verdict of the changes, either direction.
pub fn worst(changes: &[Change]) -> Option<DriftVerdict> {
    changes.iter().map(|c| c.a_reads_b.0.max(c.b_reads_a.0)).max()
}
