//! The generated Markdown reports of `docs/reports/` as pages: the
//! cross-release compatibility matrix (`conformance compat`) and each
//! release's schema report (`golden/generate/new-release.sh`), rendered
//! as they are committed, with the schema drift per release above the
//! compatibility matrix; and what the suite catches: the equivalences its
//! checks allow with their live proofs (`docs/equivalences.md`) and the
//! mutation score (`docs/mutation.md`) and the planted-bug campaign
//! (`docs/planted-bugs.md`).

use maud::html;

use super::{markdown, page, SiteFile};
use crate::load::Inputs;

pub(crate) fn pages(inputs: &Inputs) -> Vec<SiteFile> {
    let mut out = Vec::new();
    let releases: Vec<_> = inputs.documents.iter().filter(|d| d.page.starts_with("schema/")).collect();
    let compat = inputs.documents.iter().find(|d| d.page == "compatibility.html");
    let body = html! {
        h2 { "Schema drift per release" }
        (super::plots::drift_table())
        @if !releases.is_empty() {
            h2 { "Release reports" }
            ul { @for d in &releases { li { a href=(d.page) { (d.title) } " (" code { (d.source) } ")" } } }
        }
        @match compat {
            Some(d) => { p { "From " code { (d.source) } "." } (markdown(&d.markdown)) },
            None => p { "No compatibility matrix in this checkout (docs/reports/compatibility.md)." },
        }
    };
    out.push(page("compatibility.html", "Cross-release compatibility of the wire messages", body));
    let catches = ["equivalences.html", "mutation.html", "planted-bugs.html"];
    for d in inputs.documents.iter().filter(|d| catches.contains(&d.page.as_str())) {
        let body = html! { p { "From " code { (d.source) } "." } (markdown(&d.markdown)) };
        out.push(page(&d.page, &d.title, body));
    }
    for d in releases {
        let body = html! { p { "From " code { (d.source) } "." } (markdown(&d.markdown)) };
        out.push(page(&d.page, &d.title, body));
    }
    out
}
