//! The engine-release matrix (docs/runner/releases.md "Engine releases"):
//! every vLLM release the mock engine played against every gateway swept,
//! each cell linked to that release's page (what the mock registered
//! with, each item's outcome, the command that sweeps just that release).

use maud::html;

use super::{page, slug, SiteFile};
use crate::load::Inputs;
use crate::model::SweepRelease;
use crate::repro;

/// The cell's class: the gateway talks to the release, talks with some
/// items failing, or refused it.
fn class(outcome: &str) -> &'static str {
    match outcome {
        "talks" => "talks",
        "not connected" => "not-connected",
        _ => "partial",
    }
}

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut releases: Vec<&str> = Vec::new();
    for s in &inputs.sweeps {
        for r in &s.report.releases {
            if !releases.contains(&r.release.as_str()) {
                releases.push(&r.release);
            }
        }
    }
    let mut out = Vec::new();
    let body = html! {
        p { "The suite's mock engine plays each vLLM release with that release's schema table: it registers as that release does, "
            "sends its outputs as that release writes them and reads the gateway's requests with its table. Per release: readiness, "
            "then a completion to length, an EOS finish and logprobs, each judged against the gateway's own release." }
        p .legend { span .talks { "talks" } span .partial { "connected, some items fail" } span .not-connected { "not connected" } span .none { "not swept" } }
        table #release-matrix .matrix {
            thead { tr { th { "vLLM release" } @for s in &inputs.sweeps { th { (s.report.gateway) " (own " (s.report.own_release) ")" } } } }
            tbody {
                @for rel in &releases {
                    tr {
                        th { (rel) }
                        @for s in &inputs.sweeps {
                            @match s.report.releases.iter().find(|r| r.release == *rel) {
                                Some(r) => td class=(format!("cell {}", class(&r.outcome))) title=(r.reason.clone().unwrap_or_default()) {
                                    a href=(format!("sweeps/{}/{}.html", s.report.gateway, slug(rel))) { (r.outcome) " (" (r.passed) "/" (r.total) ")" }
                                },
                                None => td .cell .none { "not swept" },
                            }
                        }
                    }
                }
            }
        }
    };
    out.push(page("releases.html", "Engine releases: which vLLM releases each gateway talks to", body));
    for s in &inputs.sweeps {
        for r in &s.report.releases {
            out.push(release_page(inputs, &s.report.gateway, &s.file, r));
        }
    }
    out
}

fn release_page(inputs: &Inputs, gateway: &str, file: &str, r: &SweepRelease) -> SiteFile {
    let repro = repro::release(&inputs.named, gateway, &r.release);
    let body = html! {
        p class=(class(&r.outcome)) { strong { (r.outcome) } " (" (r.passed) "/" (r.total) " items)" }
        @if let Some(reason) = &r.reason { p { "First failure: " (reason) } }
        p { "Engine side: " (r.engine_side) "." }
        table {
            tr { th { "item" } th { "outcome" } th { "detail" } }
            @for i in &r.items { tr { td { (i.name) } td { (i.outcome) } td { (crate::markdown::shorten(&i.detail, 800)) } } }
        }
        h2 { "Reproduce" }
        pre { code { (repro.script()) } }
        p { "Report " code { (inputs.reports_dir) "/" (file) } "." }
    };
    page(&format!("sweeps/{gateway}/{}.html", slug(&r.release)), &format!("{gateway} against vLLM {}", r.release), body)
}
