//! The differential's parameter matrices (docs/runner/differential.md):
//! per report, every field of vLLM's request models by endpoint, each cell
//! `same`, `differs` or `refused`, linked to the field's page. A field's
//! page holds, per endpoint, its findings as bug reports (the request as
//! `curl`, each differing value, the command that reruns just that probe),
//! and the same as Markdown beside it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use maud::html;

use super::{markdown, page, slug, SiteFile};
use crate::finding::curl_json;
use crate::load::{Inputs, Loaded};
use crate::markdown::{block, cell, code, shorten};
use crate::model::{DiffFinding, DifferentialReport};
use crate::repro;

/// The report's name in the site: its file name without `differential-`.
fn stem(file: &str) -> String {
    file.trim_start_matches("differential-").trim_end_matches(".json").to_string()
}

fn columns(r: &DifferentialReport) -> Vec<String> {
    let set: BTreeSet<&String> = r.matrix.values().flat_map(|m| m.keys()).collect();
    set.into_iter().cloned().collect()
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut out = Vec::new();
    let body = html! {
        p { "Every field of vLLM's OpenAI request models, set alone on a short base request, sent to the gateway and to its reference frontend, "
            "both on the suite's mock engine; the engine messages and the answers compared. "
            code { "same" } " as the reference, " code { "differs" } " (something differs in what was sent or answered), "
            code { "refused" } " (refused where the reference served it). Each cell links to the field's findings." }
        p .legend { span .same { "same" } span .differs { "differs" } span .refused { "refused" } span .none { "not probed" } }
        @for l in &inputs.differentials {
            @let r = &l.report;
            @let st = stem(&l.file);
            @let cols = columns(r);
            h2 id=(st) { (r.gateway) " against " (r.reference) }
            p { (r.probes) " probes, " (r.findings.len()) " findings; report " code { (inputs.reports_dir) "/" (l.file) } "." }
            table .matrix .differential data-gateway=(st) {
                thead { tr { th { "field" } @for c in &cols { th .column { (c) } } } }
                tbody {
                    @for (field, row) in &r.matrix {
                        tr {
                            th { a href=(format!("differential/{st}/{}.html", slug(field))) { (field) } }
                            @for c in &cols {
                                @match row.get(c) {
                                    Some(v) => td class=(format!("cell {}", v.label())) title=(format!("{field} · {c}: {}", v.label())) {
                                        a href=(format!("differential/{st}/{}.html#{}", slug(field), slug(c))) { (v.label()) }
                                    },
                                    None => td .cell .none { "" },
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    out.push(page("differential.html", "The differential: request fields, gateway against reference", body));
    for l in &inputs.differentials {
        out.extend(field_pages(inputs, l));
    }
    out
}

fn field_pages(inputs: &Inputs, l: &Loaded<DifferentialReport>) -> Vec<SiteFile> {
    let r = &l.report;
    let st = stem(&l.file);
    let mut out = Vec::new();
    for (field, row) in &r.matrix {
        let (intro, sections) = field_markdown(inputs, r, field, row.keys().map(String::as_str).collect());
        let path = format!("differential/{st}/{}", slug(field));
        let body = html! {
            p { a href=(format!("{}.md", slug(field))) { "This page as Markdown" } ", ready to paste into the gateway's issue tracker." }
            (markdown(&intro))
            @for (c, md) in &sections {
                section id=(slug(c)) { (markdown(md)) }
            }
        };
        let md: String = std::iter::once(intro).chain(sections.into_iter().map(|(_, m)| m)).collect();
        out.push(page(&format!("{path}.html"), &format!("{} · {field} (against {})", r.gateway, r.reference), body));
        out.push(SiteFile { path: format!("{path}.md"), contents: md });
    }
    out
}

/// A field's findings as Markdown: an introduction, then per endpoint a
/// section (the matrix cell links to it by the endpoint's slug).
fn field_markdown(
    inputs: &Inputs,
    r: &DifferentialReport,
    field: &str,
    cols: Vec<&str>,
) -> (String, Vec<(String, String)>) {
    let intro = format!(
        "The differential of {} against {} (vLLM's frontend) on the field {}: the field set alone on the base request, both on the suite's mock engine (docs/runner/differential.md).\n\n",
        r.gateway,
        r.reference,
        code(field)
    );
    let mut sections = Vec::new();
    for c in cols {
        let mut s = String::new();
        let verdict = r.matrix.get(field).and_then(|m| m.get(c)).map_or("not probed", |v| v.label());
        let _ = writeln!(s, "## {c}: {verdict}\n");
        let found: Vec<&DiffFinding> = r.findings.iter().filter(|f| f.row() == field && f.column() == c).collect();
        if found.is_empty() {
            s.push_str("Every value probed was answered as the reference answers it.\n\n");
        }
        for f in found {
            finding_markdown(&mut s, inputs, r, f);
        }
        sections.push((c.to_string(), s));
    }
    (intro, sections)
}

fn finding_markdown(s: &mut String, inputs: &Inputs, r: &DifferentialReport, f: &DiffFinding) {
    let value = serde_json::to_string(&f.value).unwrap_or_default();
    let _ = writeln!(s, "### {} = {}\n", code(f.row()), code(&shorten(&value, 200)));
    let mut body = f.request.clone();
    if f.stream {
        if let serde_json::Value::Object(m) = &mut body {
            m.entry("stream").or_insert(serde_json::Value::Bool(true));
        }
    }
    let _ = writeln!(s, "The request:\n\n{}", block("sh", &curl_json(&f.endpoint, &body)));
    if let Some(status) = f.refused {
        let _ = writeln!(s, "{} refused it with HTTP {status}; {} served it.\n", r.gateway, r.reference);
    }
    if !f.differences.is_empty() {
        let _ =
            writeln!(s, "| where | {} (reference) | {} |\n| --- | --- | --- |", cell(&r.reference), cell(&r.gateway));
    }
    for d in &f.differences {
        let show = |v: &serde_json::Value| code(&shorten(&serde_json::to_string(v).unwrap_or_default(), 300));
        let _ = writeln!(s, "| {} | {} | {} |", code(&d.path), show(&d.reference), show(&d.test));
    }
    let repro = repro::differential(&inputs.named, &r.reference, &r.gateway, f);
    let _ = writeln!(s, "\nReproduce:\n\n{}", block("sh", &repro.script()));
}
