//! Reports in the vocabulary of `conformance verify`: pass, fail, expected
//! failure, drift, skip; a text summary, `--report-json`, `--report-junit`;
//! the expectations file (scenarios known to fail, with the reason); and
//! sharding.
//!
//! Drift is decided with `engine_protocol`'s shared outcome classification
//! ([`engine_protocol::Outcome::is_drift`]): a scenario whose checks pass
//! while the decoder reported unknown fields is `drift`, not `pass`.

use std::fmt::Write as _;

use engine_protocol::Outcome;
use serde_json::json;

/// The verdict on one scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    /// Failed, and listed in the expectations file with this reason.
    ExpectedFailure(String),
    /// Passed, but the engine sent fields the schema does not know.
    Drift(Vec<String>),
    Skip(String),
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::ExpectedFailure(_) => "expected failure",
            Verdict::Drift(_) => "drift",
            Verdict::Skip(_) => "skip",
        }
    }

    pub fn detail(&self) -> Option<String> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail(d) | Verdict::ExpectedFailure(d) | Verdict::Skip(d) => Some(d.clone()),
            Verdict::Drift(p) => Some(p.join(", ")),
        }
    }

    /// From the check failures and the decoder's drift paths.
    pub fn from_run(failures: &[String], drift: Vec<String>) -> Verdict {
        if !failures.is_empty() {
            return Verdict::Fail(failures.join("; "));
        }
        if (Outcome::Accept { drift: drift.clone() }).is_drift() {
            Verdict::Drift(drift)
        } else {
            Verdict::Pass
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioResult {
    pub scenario: String,
    pub verdict: Verdict,
    pub seconds: f64,
}

/// Scenarios known to fail: one per line, `name reason...`; `#` comments.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    pub entries: Vec<(String, String)>,
}

impl Expectations {
    pub fn parse(text: &str) -> Result<Expectations, String> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            if reason.trim().is_empty() {
                return Err(format!("expectations line {}: `{name}` has no reason", i + 1));
            }
            entries.push((name.to_string(), reason.trim().to_string()));
        }
        Ok(Expectations { entries })
    }

    fn reason(&self, name: &str) -> Option<&str> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, r)| r.as_str())
    }

    /// A listed failure becomes an expected failure; a listed scenario that
    /// passes is a failure (the list must be kept honest).
    pub fn apply(&self, r: &mut ScenarioResult) {
        let Some(reason) = self.reason(&r.scenario) else { return };
        r.verdict = match &r.verdict {
            Verdict::Fail(d) => Verdict::ExpectedFailure(format!("{reason} ({d})")),
            Verdict::Pass | Verdict::Drift(_) => {
                Verdict::Fail(format!("listed as expected to fail ({reason}) but passed: remove it from the list"))
            }
            other => other.clone(),
        };
    }
}

/// `i/n` with 1 <= i <= n.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s.split_once('/').ok_or_else(|| format!("--shard {s}: expected i/n"))?;
    let (i, n): (usize, usize) = (
        i.parse().map_err(|_| format!("--shard {s}: bad index"))?,
        n.parse().map_err(|_| format!("--shard {s}: bad count"))?,
    );
    if n == 0 || i == 0 || i > n {
        return Err(format!("--shard {s}: need 1 <= i <= n"));
    }
    Ok((i, n))
}

/// Whether the `k`-th scenario (in name order) belongs to shard `i/n`.
pub fn in_shard(k: usize, (i, n): (usize, usize)) -> bool {
    k % n == i - 1
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub expected_failures: usize,
    pub drift: usize,
    pub skipped: usize,
}

pub fn totals(rs: &[ScenarioResult]) -> Totals {
    let mut t = Totals::default();
    for r in rs {
        match r.verdict {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail(_) => t.failed += 1,
            Verdict::ExpectedFailure(_) => t.expected_failures += 1,
            Verdict::Drift(_) => t.drift += 1,
            Verdict::Skip(_) => t.skipped += 1,
        }
    }
    t
}

/// One line per scenario and the closing `N passed, M failed` line.
pub fn text(rs: &[ScenarioResult]) -> String {
    let mut s = String::new();
    for r in rs {
        let _ = match r.verdict.detail() {
            Some(d) => writeln!(s, "{:<18} {} ({:.1}s): {d}", r.verdict.label(), r.scenario, r.seconds),
            None => writeln!(s, "{:<18} {} ({:.1}s)", r.verdict.label(), r.scenario, r.seconds),
        };
    }
    let t = totals(rs);
    let _ = write!(s, "{} passed, {} failed", t.passed, t.failed);
    if t.expected_failures > 0 {
        let _ = write!(s, ", {} expected failures", t.expected_failures);
    }
    if t.drift > 0 {
        let _ = write!(s, ", {} drift", t.drift);
    }
    if t.skipped > 0 {
        let _ = write!(s, ", {} skipped", t.skipped);
    }
    s.push('\n');
    s
}

pub fn json(engine: &str, rs: &[ScenarioResult]) -> String {
    let t = totals(rs);
    let results: Vec<_> = rs
        .iter()
        .map(|r| json!({"scenario": r.scenario, "outcome": r.verdict.label(), "detail": r.verdict.detail(), "seconds": r.seconds}))
        .collect();
    let v = json!({
        "engine": engine,
        "totals": {"passed": t.passed, "failed": t.failed, "expected_failures": t.expected_failures, "drift": t.drift, "skipped": t.skipped},
        "results": results,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

fn xml(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            '\'' => "&apos;".into(),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => " ".into(),
            c => c.to_string(),
        })
        .collect()
}

pub fn junit(engine: &str, rs: &[ScenarioResult]) -> String {
    let t = totals(rs);
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuite name=\"gpu-runner {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        xml(engine),
        rs.len(),
        t.failed,
        t.skipped + t.expected_failures
    );
    for r in rs {
        let _ = write!(s, "  <testcase classname=\"replay\" name=\"{}\" time=\"{:.3}\"", xml(&r.scenario), r.seconds);
        match &r.verdict {
            Verdict::Pass => s.push_str("/>\n"),
            Verdict::Fail(d) => {
                let _ = writeln!(s, ">\n    <failure message=\"{}\"/>\n  </testcase>", xml(d));
            }
            Verdict::ExpectedFailure(d) => {
                let _ = writeln!(s, ">\n    <skipped message=\"expected failure: {}\"/>\n  </testcase>", xml(d));
            }
            Verdict::Skip(d) => {
                let _ = writeln!(s, ">\n    <skipped message=\"{}\"/>\n  </testcase>", xml(d));
            }
            Verdict::Drift(p) => {
                let _ = writeln!(s, ">\n    <system-out>drift: {}</system-out>\n  </testcase>", xml(&p.join(", ")));
            }
        }
    }
    s.push_str("</testsuite>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, v: Verdict) -> ScenarioResult {
        ScenarioResult { scenario: name.into(), verdict: v, seconds: 0.5 }
    }

    #[test]
    fn verdicts_use_the_conformance_vocabulary() {
        assert_eq!(Verdict::from_run(&[], vec![]), Verdict::Pass);
        assert_eq!(Verdict::from_run(&[], vec!["x.y".into()]).label(), "drift");
        assert_eq!(Verdict::from_run(&["bad".into()], vec!["x.y".into()]).label(), "fail");
        assert_eq!(Verdict::ExpectedFailure("w".into()).label(), "expected failure");
        assert_eq!(Verdict::Skip("w".into()).label(), "skip");
    }

    #[test]
    fn expectations_turn_failures_into_expected_failures_and_passes_into_failures() {
        let e = Expectations::parse("# known\nflaky engine bug 123\n").unwrap();
        let mut a = r("flaky", Verdict::Fail("boom".into()));
        e.apply(&mut a);
        assert_eq!(a.verdict, Verdict::ExpectedFailure("engine bug 123 (boom)".into()));
        let mut b = r("flaky", Verdict::Pass);
        e.apply(&mut b);
        assert!(matches!(b.verdict, Verdict::Fail(_)));
        assert!(Expectations::parse("noreason\n").unwrap_err().contains("no reason"));
    }

    #[test]
    fn shards_partition_the_scenarios() {
        assert_eq!(parse_shard("2/3"), Ok((2, 3)));
        for bad in ["0/3", "4/3", "1/0", "x", "1/x"] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
        let n = 3;
        for k in 0..10 {
            assert_eq!((1..=n).filter(|&i| in_shard(k, (i, n))).count(), 1);
        }
    }

    #[test]
    fn reports_end_with_the_totals_and_escape_xml() {
        let rs =
            vec![r("a", Verdict::Pass), r("b<&>", Verdict::Fail("x \"y\"".into())), r("c", Verdict::Skip("s".into()))];
        let t = text(&rs);
        assert!(t.ends_with("1 passed, 1 failed, 1 skipped\n"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&json("mock", &rs)).unwrap();
        assert_eq!(j["totals"]["failed"], 1);
        assert_eq!(j["results"][1]["outcome"], "fail");
        let x = junit("mock", &rs);
        assert!(x.contains("name=\"b&lt;&amp;&gt;\""), "{x}");
        assert!(x.contains("<failure message=\"x &quot;y&quot;\"/>"), "{x}");
    }
}
