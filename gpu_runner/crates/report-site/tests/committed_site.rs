//! The site of this checkout's committed reports: every finding has its
//! bug report with a reproduction command, the matrix has a row per
//! gateway and a cell per scenario, every link inside the site resolves;
//! and reports that are not what their names say are refused, named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use report_site::{site_files, slug, Inputs, Paths, SiteFile};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn committed() -> (Inputs, Vec<SiteFile>) {
    let inputs = Inputs::read(&Paths::checkout(&checkout())).expect("the committed reports read");
    let files = site_files(&inputs);
    (inputs, files)
}

fn file<'a>(files: &'a [SiteFile], path: &str) -> &'a str {
    &files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("no {path} in the site")).contents
}

#[test]
fn every_committed_gateway_finding_has_a_bug_report_with_the_command_that_reproduces_it() {
    let (inputs, files) = committed();
    let mut n = 0;
    for g in &inputs.gateways {
        for r in g.report.results.iter().filter(|r| r.outcome.is_finding()) {
            let base = format!("gateways/{}/{}", g.report.gateway, r.scenario);
            let md = file(&files, &format!("{base}.md"));
            let html = file(&files, &format!("{base}.html"));
            assert!(
                md.contains("gateway --gateway ") && md.contains(&format!("--only {}\n", r.scenario)),
                "{base}: {md}"
            );
            assert!(html.contains(&format!("--only {}", r.scenario)), "{base}");
            let sends_http = inputs.scenarios[&r.scenario].requests.iter().any(|q| q.body.is_some());
            assert_eq!(md.contains("curl -sS"), sends_http, "{base}: a curl command for each request sent");
            for c in r.checks.iter().filter(|c| !c.ok) {
                assert!(md.contains(&format!("`{}`", c.check)), "{base}: failed check {} listed", c.check);
            }
            n += 1;
        }
    }
    assert!(n >= 30, "the committed reports hold at least 30 findings, saw {n}");
}

#[test]
fn every_committed_differential_finding_is_on_its_fields_page_with_a_rerun_of_just_that_probe() {
    let (inputs, files) = committed();
    for l in &inputs.differentials {
        let st = l.file.trim_start_matches("differential-").trim_end_matches(".json");
        for f in &l.report.findings {
            let md = file(&files, &format!("differential/{st}/{}.md", slug(f.row())));
            let endpoint = if f.endpoint.contains("chat") { "chat" } else { "completions" };
            let stream = if f.stream { "yes" } else { "no" };
            assert!(md.contains(&format!("--endpoints {endpoint} --stream {stream}")), "{st} {}: {md}", f.row());
        }
    }
}

#[test]
fn the_matrix_has_the_reference_first_a_row_per_gateway_report_and_a_cell_per_scenario() {
    let (inputs, files) = committed();
    let index = file(&files, "index.html");
    let rows: Vec<&str> = index.split("<tr class=\"gateway").skip(1).collect();
    assert_eq!(rows.len(), inputs.gateways.len());
    assert!(rows[0].starts_with(" reference\" data-gateway=\"vllm-0.32.0-frontend\""), "{}", &rows[0][..80]);
    let scenarios = inputs.scenario_names().len();
    assert_eq!(scenarios, inputs.scenarios.len(), "every scenario file is a column");
    for r in rows {
        assert_eq!(r.matches("<td class=\"cell ").count(), scenarios, "{}", &r[..80]);
    }
}

/// The targets of `href="..."` and `src="..."` in a page.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for part in html.split(attr).skip(1) {
            out.push(part.split('"').next().unwrap_or("").to_string());
        }
    }
    out
}

#[test]
fn every_link_inside_the_site_names_a_file_of_it_and_nothing_is_loaded_from_the_network() {
    let (_, files) = committed();
    let paths: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let mut checked = 0;
    for f in files.iter().filter(|f| f.path.ends_with(".html")) {
        let dir = Path::new(&f.path).parent().unwrap_or(Path::new(""));
        for l in links(&f.contents) {
            if l.starts_with("http://") || l.starts_with("https://") {
                assert!(!f.contents.contains(&format!("src=\"{l}\"")), "{}: loads {l}", f.path);
                continue;
            }
            let target = l.split('#').next().unwrap_or("");
            if target.is_empty() {
                continue;
            }
            let mut parts: Vec<String> = Vec::new();
            for c in dir.join(target).components() {
                match c {
                    std::path::Component::ParentDir => {
                        assert!(parts.pop().is_some(), "{}: {l} leaves the site", f.path);
                    }
                    std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
                    _ => {}
                }
            }
            let resolved = parts.join("/");
            assert!(paths.contains(resolved.as_str()), "{}: link {l} ({resolved}) names no file of the site", f.path);
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// A checkout with one gateway report and one scenario file.
fn fake_checkout(report: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("golden/gateway/reports")).unwrap();
    std::fs::write(d.path().join("golden/gateway/reports/gw-1.json"), report).unwrap();
    std::fs::write(
        d.path().join("golden/gateway/s.json"),
        r#"{"scenario": "s", "doc": "A thing.", "requests": [{"id": "r", "endpoint": "completions", "body": {"prompt": "x"}}]}"#,
    )
    .unwrap();
    d
}

#[test]
fn a_report_with_an_outcome_outside_the_vocabulary_is_refused_naming_the_file() {
    let d = fake_checkout(r#"{"gateway": "gw-1", "results": [{"scenario": "s", "outcome": "passed"}]}"#);
    let e = Inputs::read(&Paths::checkout(d.path())).unwrap_err().to_string();
    assert!(e.contains("gw-1.json") && e.contains("unknown variant `passed`"), "{e}");
}

#[test]
fn a_folder_without_a_gateway_report_is_refused() {
    let d = fake_checkout("{}");
    std::fs::remove_file(d.path().join("golden/gateway/reports/gw-1.json")).unwrap();
    let e = Inputs::read(&Paths::checkout(d.path())).unwrap_err().to_string();
    assert!(e.contains("no gateway report"), "{e}");
}

#[test]
fn a_gateway_outside_the_named_list_still_gets_its_pages_and_a_command() {
    let d = fake_checkout(
        r#"{"gateway": "gw-1", "results": [{"scenario": "s", "outcome": "fail", "detail": "boom",
            "checks": [{"request": "r", "check": "status", "ok": false, "detail": "HTTP 500, expected 200"}]}]}"#,
    );
    let inputs = Inputs::read(&Paths::checkout(d.path())).unwrap();
    let files = site_files(&inputs);
    let md = file(&files, "gateways/gw-1/s.md");
    assert!(md.contains("gateway --gateway gw-1 --only s"), "{md}");
    assert!(md.contains("| `r` | `status` | HTTP 500, expected 200 |"), "{md}");
    assert!(md.contains(r#"-d '{"model":"golden/tiny","prompt":"x"}'"#), "{md}");
}
