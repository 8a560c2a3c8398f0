//! The suite's results as a static site (`gpu-runner report --html DIR`):
//! the committed reports of a checkout as linked HTML pages a gateway
//! maintainer reads first, in the manner of Autobahn|Testsuite's report.
//!
//! - The index: the gateway by scenario matrix, the reference (vLLM's own
//!   frontend) first, each cell linked to its page.
//! - Each finding a bug report (`finding`): the gateway and version, the
//!   scenario in one sentence, the HTTP request as `curl`, the engine's
//!   script, what vLLM's frontend does and where that expectation comes
//!   from, what the gateway did, the decoded ADD/ABORT diff (`add_diff`) and
//!   the one command that reproduces it (`repro`); the same as Markdown
//!   beside the page.
//! - The differential's parameter matrices, the engine-release matrix, the
//!   wire-fault matrix, the codec testees and the cross-release
//!   compatibility matrix, each cell linked to its detail.
//! - Plots (`svg`): the gateway bench, the soak, the schema drift across
//!   releases (`drift`).
//!
//! No page runs a script or loads anything from the network; the folder
//! is the site (`file://` or any static host). docs/report-site.md has
//! the layout and how the site is tested in a headless browser.

mod add_diff;
mod drift;
mod error;
mod finding;
mod load;
mod markdown;
mod model;
mod pages;
mod repro;
mod svg;

use std::path::Path;

pub use add_diff::{diff_request, FieldDiff};
pub use drift::{drift, ReleaseDrift};
pub use error::SiteError;
pub use finding::{curl_json, ScenarioFinding, SERVED_MODEL};
pub use load::{Document, Inputs, Loaded, Paths, DEFAULT_REFERENCE};
pub use model::{
    CheckRow, DiffCell, DiffFinding, DifferentialReport, FaultCase, FaultsReport, GatewayReport, Outcome, RequestRow,
    ScenarioFile, ScenarioRequest, ScenarioRow, SweepReport,
};
pub use pages::{all as site_files, slug, SiteFile};
pub use repro::Repro;

/// What [`build`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub pages: usize,
    pub markdown: usize,
    pub findings: usize,
}

/// Writes the site of `inputs` into `out` (created if missing; files of an
/// earlier site are overwritten, others left).
pub fn build(inputs: &Inputs, out: &Path) -> Result<Summary, SiteError> {
    let files = pages::all(inputs);
    for f in &files {
        let path = out.join(&f.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| SiteError::Io { path: dir.to_path_buf(), source })?;
        }
        std::fs::write(&path, &f.contents).map_err(|source| SiteError::Io { path: path.clone(), source })?;
    }
    let findings = inputs.gateways.iter().flat_map(|g| &g.report.results).filter(|r| r.outcome.is_finding()).count();
    Ok(Summary {
        pages: files.iter().filter(|f| f.path.ends_with(".html")).count(),
        markdown: files.iter().filter(|f| f.path.ends_with(".md")).count(),
        findings,
    })
}

/// Data at the bottom (the report types), then what is computed from
/// them, then the pages on top: nothing below the pages uses them.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_report_types_use_nothing_of_the_site_and_nothing_uses_the_pages() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        for floor in ["model", "markdown", "svg", "error"] {
            let crate_modules: Vec<&String> = g.edges[floor].keys().filter(|m| g.edges.contains_key(*m)).collect();
            assert!(crate_modules.is_empty(), "{floor} uses {crate_modules:?}");
        }
        for (m, uses) in &g.edges {
            assert!(m == "pages" || !uses.contains_key("pages"), "{m} uses the pages");
        }
    }
}
