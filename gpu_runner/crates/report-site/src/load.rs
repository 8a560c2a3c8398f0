//! Everything the site shows, read from a checkout: the reports of
//! `golden/gateway/reports/` (sorted into their kinds by file-name prefix,
//! as `gpu-runner scoreboard --reports-dir` sorts them), the scenario files
//! of `golden/gateway/`, the codec testee reports of `testees/reports/`,
//! the named gateways (`gateway_scoring::gateway::named`, the runner's own
//! recipes), the generated Markdown reports of `docs/reports/`
//! and the bench and soak reports behind the plots (`docs/img/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gateway_scoring::gateway::named::{self, NamedGateway};
use gateway_scoring::scoreboard::{self, CodecReport, ReportFile};
use serde::de::DeserializeOwned;
use serde_json::Value as Json;

use crate::error::SiteError;
use crate::model::{DifferentialReport, FaultsReport, GatewayReport, ScenarioFile, SweepReport};

/// The gateway report every other gateway is compared with when the
/// reports hold no Python frontend of its own release: vLLM 0.32.0's own
/// OpenAI server (docs/runner/gateway.md "The reference run").
pub const DEFAULT_REFERENCE: &str = "vllm-0.32.0-frontend";

/// A report and the file it came from (its name inside its folder).
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    pub file: String,
    pub report: T,
}

/// A generated Markdown report shown as a page.
#[derive(Debug, Clone)]
pub struct Document {
    pub title: String,
    /// Its path inside the checkout (`docs/reports/compatibility.md`).
    pub source: String,
    /// The page's file name in the site.
    pub page: String,
    pub markdown: String,
}

/// The site's inputs.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Gateway reports, the reference first.
    pub gateways: Vec<Loaded<GatewayReport>>,
    pub differentials: Vec<Loaded<DifferentialReport>>,
    pub sweeps: Vec<Loaded<SweepReport>>,
    pub faults: Vec<Loaded<FaultsReport>>,
    pub codecs: Vec<CodecReport>,
    pub scenarios: BTreeMap<String, ScenarioFile>,
    pub named: Vec<NamedGateway>,
    pub documents: Vec<Document>,
    /// `gpu-runner gateway-bench --report-json` (docs/img/gateway-bench.json).
    pub bench: Option<Json>,
    /// `gpu-runner soak --report` (docs/img/soak-1h.json).
    pub soak: Option<Json>,
    /// Where the reports were read from, as the pages name it.
    pub reports_dir: String,
}

/// Where [`Inputs::read`] reads from; [`Paths::checkout`] gives the
/// committed files of a checkout.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: PathBuf,
    pub reports: PathBuf,
    pub scenarios: PathBuf,
    pub codecs: PathBuf,
}

impl Paths {
    pub fn checkout(root: &Path) -> Paths {
        Paths {
            root: root.to_path_buf(),
            reports: root.join("golden/gateway/reports"),
            scenarios: root.join("golden/gateway"),
            codecs: root.join("testees/reports"),
        }
    }
}

fn read_text(p: &Path) -> Result<String, SiteError> {
    std::fs::read_to_string(p).map_err(|source| SiteError::Io { path: p.to_path_buf(), source })
}

fn read_as<T: DeserializeOwned>(p: &Path) -> Result<T, SiteError> {
    serde_json::from_str(&read_text(p)?).map_err(|source| SiteError::Json { path: p.to_path_buf(), source })
}

/// The `*.json` files of `dir`, sorted by name.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, SiteError> {
    scoreboard::json_files(dir).map_err(|source| SiteError::Io { path: dir.to_path_buf(), source })
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

fn shown(p: &Path, root: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

impl Inputs {
    /// Reads every input; the first file that is not what its name says
    /// is an error naming it.
    pub fn read(paths: &Paths) -> Result<Inputs, SiteError> {
        let mut inputs = Inputs { reports_dir: shown(&paths.reports, &paths.root), ..Inputs::default() };
        for p in json_files(&paths.reports)? {
            let name = file_name(&p);
            match ReportFile::of(&name) {
                ReportFile::Differential => inputs.differentials.push(Loaded { file: name, report: read_as(&p)? }),
                ReportFile::Releases => inputs.sweeps.push(Loaded { file: name, report: read_as(&p)? }),
                ReportFile::Faults => inputs.faults.push(Loaded { file: name, report: read_as(&p)? }),
                ReportFile::Gateway => inputs.gateways.push(Loaded { file: name, report: read_as(&p)? }),
                ReportFile::Companion | ReportFile::Planted => {}
            }
        }
        if let Some(i) = inputs.gateways.iter().position(|g| g.report.gateway == DEFAULT_REFERENCE) {
            let reference = inputs.gateways.remove(i);
            inputs.gateways.insert(0, reference);
        }
        for p in json_files(&paths.scenarios)? {
            let s: ScenarioFile = read_as(&p)?;
            inputs.scenarios.insert(s.scenario.clone(), s);
        }
        if paths.codecs.is_dir() {
            for p in json_files(&paths.codecs)? {
                let v: Json = read_as(&p)?;
                let stem = p.file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                inputs.codecs.push(
                    CodecReport::parse(&stem, &file_name(&p), &v)
                        .map_err(|e| SiteError::Report { path: p.clone(), why: e.to_string() })?,
                );
            }
        }
        inputs.named = named::all().to_vec();
        inputs.documents = documents(&paths.root)?;
        for (slot, rel) in
            [(&mut inputs.bench, "docs/img/gateway-bench.json"), (&mut inputs.soak, "docs/img/soak-1h.json")]
        {
            let p = paths.root.join(rel);
            if p.is_file() {
                *slot = Some(read_as(&p)?);
            }
        }
        if inputs.gateways.is_empty() {
            return Err(SiteError::NoGatewayReports { dir: paths.reports.clone() });
        }
        Ok(inputs)
    }

    /// The gateway report of this name.
    pub fn gateway(&self, name: &str) -> Option<&GatewayReport> {
        self.gateways.iter().map(|g| &g.report).find(|g| g.gateway == name)
    }

    /// Every scenario of the gateway reports, in the order of the first
    /// report that has it (the reference's order first).
    pub fn scenario_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for g in &self.gateways {
            for r in &g.report.results {
                if !out.contains(&r.scenario.as_str()) {
                    out.push(&r.scenario);
                }
            }
        }
        out
    }

    /// The report a gateway's findings are compared with: vLLM's Python
    /// frontend of the gateway's own release where the reports have it
    /// (`vllm-rs-0.34.0` against `vllm-0.34.0`), else
    /// [`DEFAULT_REFERENCE`]; `None` for the reference itself.
    pub fn reference_for(&self, gateway: &str) -> Option<&GatewayReport> {
        let own = self.named.iter().find(|n| n.name == gateway).map(|n| format!("vllm-{}", n.release));
        let candidates = own.into_iter().chain([DEFAULT_REFERENCE.to_string()]);
        candidates.filter(|c| c != gateway).find_map(|c| self.gateway(&c))
    }
}

/// The generated Markdown reports of `docs/reports/` (the scoreboard
/// excepted: the site is its pages): the compatibility matrix and each
/// release's schema report.
fn documents(root: &Path) -> Result<Vec<Document>, SiteError> {
    let mut out = Vec::new();
    let compat = root.join("docs/reports/compatibility.md");
    if compat.is_file() {
        out.push(Document {
            title: "Cross-release compatibility".into(),
            source: "docs/reports/compatibility.md".into(),
            page: "compatibility.html".into(),
            markdown: read_text(&compat)?,
        });
    }
    // What the suite catches: the equivalences its checks allow and where
    // they were proven, the mutation score of engine-protocol, and the
    // planted-bug campaign.
    for (rel, page, title) in [
        ("docs/equivalences.md", "equivalences.html", "The equivalences the checks allow, proven live"),
        ("docs/mutation.md", "mutation.html", "Mutation testing of engine-protocol"),
        ("docs/planted-bugs.md", "planted-bugs.html", "Planted gateway bugs, and those the suite finds"),
    ] {
        let p = root.join(rel);
        if p.is_file() {
            out.push(Document { title: title.into(), source: rel.into(), page: page.into(), markdown: read_text(&p)? });
        }
    }
    let dir = root.join("docs/reports/releases");
    if dir.is_dir() {
        let entries = std::fs::read_dir(&dir).map_err(|source| SiteError::Io { path: dir.clone(), source })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.sort();
        for p in files {
            let stem = p.file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            out.push(Document {
                title: format!("Release report: {stem}"),
                source: shown(&p, root),
                page: format!("schema/{stem}.html"),
                markdown: read_text(&p)?,
            });
        }
    }
    Ok(out)
}
