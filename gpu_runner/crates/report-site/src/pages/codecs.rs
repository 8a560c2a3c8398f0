//! The codec testees (docs/testee.md): each implementation of the wire
//! codec on the committed corpus, pass / fail / skip per group of cases,
//! each cell linked to the implementation's page, where every case of the
//! group is listed with its detail.

use std::collections::BTreeMap;

use gateway_scoring::scoreboard::{group_counts, CodecCase, RowStatus};
use maud::html;

use super::{page, slug, SiteFile};
use crate::load::Inputs;

fn label(s: RowStatus) -> &'static str {
    match s {
        RowStatus::Pass => "pass",
        RowStatus::Fail => "fail",
        RowStatus::Skip => "skip",
    }
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let groups = group_counts(&inputs.codecs);
    let mut out = Vec::new();
    let body = html! {
        p { "Each implementation decodes and encodes the message cases of the committed corpus through the testee protocol; the expected values are "
            "those of vLLM's own encoder and decoder. A failure is a finding about the implementation; a skip a case it does not claim." }
        table {
            tr { th { "implementation" } th { "pass" } th { "fail" } th { "skip" } }
            @for r in &inputs.codecs {
                tr { th { a href=(format!("codecs/{}.html", slug(&r.name))) { (r.name) } }
                     td { (r.count(RowStatus::Pass)) } td { (r.count(RowStatus::Fail)) } td { (r.count(RowStatus::Skip)) } }
            }
        }
        h2 { "Per group: pass / fail / skip" }
        table #codec-matrix .matrix {
            thead { tr { th { "group" } @for r in &inputs.codecs { th { (r.name) } } } }
            tbody {
                @for (g, row) in &groups {
                    tr {
                        th { code { (g) } }
                        @for (i, [p, f, k]) in row.iter().enumerate() {
                            @let class = if *f > 0 { "fail" } else if *p > 0 { "pass" } else if *k > 0 { "skip" } else { "none" };
                            td class=(format!("cell {class}")) {
                                a href=(format!("codecs/{}.html#{}", slug(&inputs.codecs[i].name), slug(g))) { (p) " / " (f) " / " (k) }
                            }
                        }
                    }
                }
            }
        }
    };
    out.push(page("codecs.html", "Codec testees on the committed corpus", body));
    for r in &inputs.codecs {
        let mut by_group: BTreeMap<&str, Vec<&CodecCase>> = BTreeMap::new();
        for c in &r.cases {
            by_group.entry(c.group.as_str()).or_default().push(c);
        }
        let body = html! {
            p { "Report " code { "testees/reports/" (r.file) } "." }
            // Every group of the corpus has its anchor: the matrix links each cell.
            @for g in groups.keys() {
                section id=(slug(g)) {
                    h2 { code { (g) } }
                    @match by_group.get(g) {
                        None => p { "No case of this group." },
                        Some(cases) => table {
                            tr { th { "case" } th { "status" } th { "detail" } }
                            @for c in cases {
                                tr { td { code { (c.case) } } td class=(label(c.status)) { (label(c.status)) }
                                     td { (crate::markdown::shorten(&c.detail, 400)) } }
                            }
                        },
                    }
                }
            }
        };
        out.push(page(&format!("codecs/{}.html", slug(&r.name)), &format!("Codec testee {}", r.name), body));
    }
    out
}
