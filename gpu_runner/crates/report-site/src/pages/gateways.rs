//! A page per gateway (its verdicts and findings) and per gateway and
//! scenario: for a finding, the bug report ([`ScenarioFinding`]) and the
//! same as Markdown beside it (`<scenario>.md`); for a pass or a skip,
//! the checks that ran.

use maud::html;

use super::{markdown, page, SiteFile};
use crate::finding::ScenarioFinding;
use crate::load::Inputs;
use crate::model::{GatewayReport, ScenarioRow};

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut out = Vec::new();
    for g in &inputs.gateways {
        let r = &g.report;
        out.push(gateway_page(inputs, r, &g.file));
        for row in &r.results {
            out.extend(scenario_page(inputs, r, row));
        }
    }
    out
}

fn gateway_page(inputs: &Inputs, r: &GatewayReport, file: &str) -> SiteFile {
    let name = &r.gateway;
    let reference = inputs.reference_for(name).map(|x| x.gateway.as_str());
    let body = html! {
        p { "Engine side: " (r.engine_side) "." }
        p { "Report " code { (inputs.reports_dir) "/" (file) } "; compared with "
            @match reference { Some(x) => { strong { (x) } }, None => { "the goldens (this is the reference run)" } } "." }
        h2 { "Findings" }
        @let findings: Vec<&ScenarioRow> = r.results.iter().filter(|x| x.outcome.is_finding()).collect();
        @if findings.is_empty() { p { "None: every scenario passed or was skipped." } }
        ul {
            @for x in &findings {
                @let f = ScenarioFinding::new(inputs, r, x);
                li { span class=(x.outcome.class()) { (x.outcome.label()) } " "
                     a href=(format!("{}.html", x.scenario)) { (f.title()) }
                     " (" a href=(format!("{}.md", x.scenario)) { "Markdown" } ")" }
            }
        }
        h2 { "Every scenario" }
        table {
            tr { th { "scenario" } th { "verdict" } th { "checks passed" } th { "seconds" } }
            @for x in &r.results {
                tr {
                    td { a href=(format!("{}.html", x.scenario)) { (x.scenario) } }
                    td class=(x.outcome.class()) { (x.outcome.label()) }
                    td { (x.checks.iter().filter(|c| c.ok).count()) "/" (x.checks.len()) }
                    td { (format!("{:.1}", x.seconds)) }
                }
            }
        }
    };
    page(&format!("gateways/{name}/index.html"), &format!("Gateway {name}"), body)
}

fn scenario_page(inputs: &Inputs, r: &GatewayReport, row: &ScenarioRow) -> Vec<SiteFile> {
    let name = &r.gateway;
    let base = format!("gateways/{name}/{}", row.scenario);
    let checks = html! {
        h2 { "Every check" }
        table {
            tr { th { "request" } th { "check" } th { "ok" } th { "detail" } th { "expected from" } }
            @for c in &row.checks {
                tr {
                    td { code { (c.request) } } td { code { (c.check) } }
                    td class=(if c.ok { "pass" } else { "fail" }) { (if c.ok { "yes" } else { "no" }) }
                    td { (crate::markdown::shorten(&c.detail, 800)) } td { (c.reference) }
                }
            }
        }
    };
    if row.outcome.is_finding() {
        let f = ScenarioFinding::new(inputs, r, row);
        let md = f.markdown();
        let body = html! {
            p { a href=(format!("{}.md", row.scenario)) { "This report as Markdown" } ", ready to paste into the gateway's issue tracker (also below)." }
            // The Markdown's own title is the page's.
            (markdown(md.split_once('\n').map_or("", |(_, rest)| rest)))
            (checks)
            h2 { "Markdown" }
            textarea .markdown readonly { (md) }
        };
        vec![page(&format!("{base}.html"), &f.title(), body), SiteFile { path: format!("{base}.md"), contents: md }]
    } else {
        let body = html! {
            p { span class=(row.outcome.class()) { (row.outcome.label()) } " " (row.detail.as_deref().unwrap_or("")) }
            p { (row.doc) }
            (checks)
        };
        vec![page(&format!("{base}.html"), &format!("{name} · {}", row.scenario), body)]
    }
}
