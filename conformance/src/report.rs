//! Reports: a text table (one line per failing case, a per-group summary,
//! and the contract's closing line `N passed, M failed[, K skipped]`), JSON,
//! and JUnit XML.

use std::collections::BTreeMap;
use std::fmt::Write as _;

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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

pub fn totals(results: &[CaseResult]) -> Totals {
    let mut t = Totals::default();
    for r in results {
        match r.verdict {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail(_) => t.failed += 1,
            Verdict::Skip(_) => t.skipped += 1,
        }
    }
    t
}

/// The contract's closing line.
pub fn summary_line(t: Totals) -> String {
    if t.skipped > 0 {
        format!("{} passed, {} failed, {} skipped", t.passed, t.failed, t.skipped)
    } else {
        format!("{} passed, {} failed", t.passed, t.failed)
    }
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
        let t = groups.entry(r.group.as_str()).or_default();
        match r.verdict {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail(_) => t.failed += 1,
            Verdict::Skip(_) => t.skipped += 1,
        }
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
            let (status, detail) = match &r.verdict {
                Verdict::Pass => ("pass", None),
                Verdict::Fail(d) => ("fail", Some(d.clone())),
                Verdict::Skip(d) => ("skip", Some(d.clone())),
            };
            json!({"case": r.id, "file": r.file, "group": r.group, "status": status, "detail": detail})
        })
        .collect();
    let doc = json!({"passed": t.passed, "failed": t.failed, "skipped": t.skipped, "cases": cases});
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push_str(&format!("&#{};", c as u32)),
            c => o.push(c),
        }
    }
    o
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
        t.skipped
    );
    for (g, rs) in groups {
        let gt = totals(&rs.iter().map(|r| (*r).clone()).collect::<Vec<_>>());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            xml_escape(g),
            rs.len(),
            gt.failed,
            gt.skipped
        );
        for r in rs {
            let _ = write!(out, "    <testcase classname=\"{}\" name=\"{}\"", xml_escape(g), xml_escape(&r.id));
            match &r.verdict {
                Verdict::Pass => out.push_str("/>\n"),
                Verdict::Fail(d) => {
                    let _ = writeln!(out, "><failure message=\"{}\"/></testcase>", xml_escape(d));
                }
                Verdict::Skip(d) => {
                    let _ = writeln!(out, "><skipped message=\"{}\"/></testcase>", xml_escape(d));
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
