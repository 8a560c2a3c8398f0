//! Reports: a text table (one line per failing case, a per-group summary,
//! and the contract's closing line `N passed, M failed[, K skipped]`), JSON,
//! and JUnit XML.
//!
//! Outcomes, their totals, labels and JUnit elements are the suite's one
//! classification (`engine_testkit::outcome`), shared with the runner's
//! reports; `verify` itself gives pass, fail and skip.

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use engine_testkit::outcome::Totals;
use engine_testkit::outcome::{xml_escape, JunitElement};
use serde_json::json;

use crate::check::Verdict;

/// One result line: the case id (or the file of a case that did not load).
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub id: String,
    pub file: String,
    /// `<dialect>/<version>/<group>` for grouping; `load` for load errors.
    pub group: String,
    pub verdict: Verdict,
}

pub fn totals(results: &[CaseResult]) -> Totals {
    Totals::of(results.iter().map(|r| &r.verdict))
}

/// The contract's closing line.
pub fn summary_line(t: Totals) -> String {
    t.summary_line()
}

pub fn text(results: &[CaseResult]) -> String {
    let mut out = String::new();
    for r in results {
        if let Verdict::Fail(why) = &r.verdict {
            let _ = writeln!(out, "FAIL {}: {why}", r.id);
        }
    }
    let mut skips: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        if let Verdict::Skip(why) = &r.verdict {
            *skips.entry(why.as_str()).or_default() += 1;
        }
    }
    for (why, n) in &skips {
        let _ = writeln!(out, "SKIP {n} case(s): {why}");
    }
    let mut groups: BTreeMap<&str, Totals> = BTreeMap::new();
    for r in results {
        groups.entry(r.group.as_str()).or_default().add(&r.verdict);
    }
    let width = groups.keys().map(|g| g.len()).max().unwrap_or(5).max(5);
    let _ = writeln!(out, "{:<width$}  {:>6}  {:>6}  {:>7}", "group", "passed", "failed", "skipped");
    for (g, t) in &groups {
        let _ = writeln!(out, "{g:<width$}  {:>6}  {:>6}  {:>7}", t.passed, t.failed, t.skipped);
    }
    let _ = writeln!(out, "{}", summary_line(totals(results)));
    out
}

pub fn json(results: &[CaseResult]) -> String {
    let t = totals(results);
    let cases: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "case": r.id,
                "file": r.file,
                "group": r.group,
                "status": r.verdict.label(),
                "detail": r.verdict.detail(),
            })
        })
        .collect();
    let doc = json!({"passed": t.passed, "failed": t.failed, "skipped": t.skipped, "cases": cases});
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

pub fn junit(results: &[CaseResult]) -> String {
    let mut groups: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
    for r in results {
        groups.entry(r.group.as_str()).or_default().push(r);
    }
    let t = totals(results);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        results.len(),
        t.failed,
        t.skipped + t.expected_failures
    );
    for (g, rs) in groups {
        let gt = Totals::of(rs.iter().map(|r| &r.verdict));
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            xml_escape(g),
            rs.len(),
            gt.failed,
            gt.skipped + gt.expected_failures
        );
        for r in rs {
            let _ = write!(out, "    <testcase classname=\"{}\" name=\"{}\"", xml_escape(g), xml_escape(&r.id));
            let detail = xml_escape(&r.verdict.detail().unwrap_or_default());
            match r.verdict.junit() {
                JunitElement::None => out.push_str("/>\n"),
                JunitElement::SystemOut => {
                    let _ = writeln!(out, "><system-out>drift: {detail}</system-out></testcase>");
                }
                e @ (JunitElement::Failure | JunitElement::Skipped) => {
                    let name = e.name().unwrap_or_default();
                    let _ = writeln!(out, "><{name} message=\"{detail}\"/></testcase>");
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
