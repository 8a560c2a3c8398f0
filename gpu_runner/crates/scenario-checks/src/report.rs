//! Reports in the vocabulary of `conformance verify`: pass, fail, expected
//! failure, drift, skip; a text summary, `--report-json`, `--report-junit`;
//! the expectations file (scenarios known to fail, with the reason); and
//! sharding.
//!
//! The verdicts, their totals, labels and JUnit elements are
//! `engine_testkit::outcome`'s. Drift is decided with `engine_protocol`'s
//! outcome classification (`engine_protocol::Outcome::is_drift`): a scenario
//! whose checks pass while the decoder reported unknown fields is `drift`,
//! not `pass`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use engine_testkit::outcome::{xml_escape as xml, JunitElement};
use serde_json::json;

/// The verdict on one scenario: the suite's one outcome classification
/// (`engine_testkit::outcome`), shared with `conformance verify`. A run's
/// verdict comes from [`Verdict::from_run`]; the expectations file turns a
/// listed failure into [`Verdict::ExpectedFailure`].
pub use engine_testkit::outcome::{Totals, Verdict};

/// A replay scenario's verdict from its typed check failures (rendered
/// here, in the report's words) and the decoder's drift.
pub fn verdict_of(failures: &[crate::check::ScenarioFailure], drift: Vec<String>) -> Verdict {
    let words: Vec<String> = failures.iter().map(ToString::to_string).collect();
    Verdict::from_run(&words, drift)
}

/// A bad expectations file or `--shard` argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// An expectations line names a scenario without a reason.
    #[error("expectations line {line}: `{name}` has no reason")]
    NoReason { line: usize, name: String },
    /// `--shard` is not `i/n` with `1 <= i <= n`.
    #[error("--shard {given}: {why}")]
    Shard { given: String, why: &'static str },
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
    pub fn parse(text: &str) -> Result<Expectations, ReportError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            if reason.trim().is_empty() {
                return Err(ReportError::NoReason { line: i + 1, name: name.to_string() });
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
        r.verdict = r.verdict.expected_to_fail(reason);
    }

    /// [`Expectations::apply`] for a scenario that may not have run at all
    /// (its gateway or engine never came up): a listing names a known
    /// finding about what the scenario checks, so it cannot excuse a
    /// scenario whose checks never ran. That failure stays a failure and
    /// says the listing did not apply.
    pub fn apply_if_ran(&self, r: &mut ScenarioResult, ran: bool) {
        if ran {
            return self.apply(r);
        }
        if let (Some(reason), Verdict::Fail(why)) = (self.reason(&r.scenario), &r.verdict) {
            r.verdict = Verdict::Fail(format!("{why} (listed as an expected failure, \"{reason}\", but it never ran)"));
        }
    }
}

/// `i/n` with 1 <= i <= n.
pub fn parse_shard(s: &str) -> Result<(usize, usize), ReportError> {
    let bad = |why| ReportError::Shard { given: s.to_string(), why };
    let (i, n) = s.split_once('/').ok_or_else(|| bad("expected i/n"))?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| bad("bad index"))?, n.parse().map_err(|_| bad("bad count"))?);
    if n == 0 || i == 0 || i > n {
        return Err(bad("need 1 <= i <= n"));
    }
    Ok((i, n))
}

/// Whether the `k`-th scenario (in name order) belongs to shard `i/n`.
pub fn in_shard(k: usize, (i, n): (usize, usize)) -> bool {
    k % n == i - 1
}

/// The scenarios of shard `i/n`, in their order: every n-th from the
/// (i-1)-th (both dialects split the same way).
pub fn keep_shard<T>(scenarios: Vec<T>, shard: (usize, usize)) -> Vec<T> {
    scenarios.into_iter().enumerate().filter(|(k, _)| in_shard(*k, shard)).map(|(_, s)| s).collect()
}

/// `limit`, cut to what is left before `deadline_at` (the run's
/// `--deadline`, if it has one).
pub fn within(limit: Duration, deadline_at: Option<Instant>) -> Duration {
    match deadline_at {
        Some(at) => limit.min(at.saturating_duration_since(Instant::now())),
        None => limit,
    }
}

/// Whether the run's `--deadline` has ended.
pub fn deadline_passed(deadline_at: Option<Instant>) -> bool {
    deadline_at.is_some_and(|at| Instant::now() >= at)
}

/// The verdict of a scenario still running when `limit` ran out: the run's
/// deadline when that cut the scenario's own `timeout`, else the timeout.
pub fn not_finished(limit: Duration, timeout: Duration) -> Verdict {
    if limit < timeout {
        Verdict::Fail("not finished when the run's --deadline ended".into())
    } else {
        Verdict::Fail(format!("not finished within {}s", timeout.as_secs()))
    }
}

pub fn totals(rs: &[ScenarioResult]) -> Totals {
    Totals::of(rs.iter().map(|r| &r.verdict))
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
    s.push_str(&totals(rs).summary_line());
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
        "totals": t.to_json(),
        "results": results,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
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
        let detail = xml(&r.verdict.detail().unwrap_or_default());
        match (r.verdict.junit(), &r.verdict) {
            (JunitElement::None, _) => s.push_str("/>\n"),
            (JunitElement::SystemOut, _) => {
                let _ = writeln!(s, ">\n    <system-out>drift: {detail}</system-out>\n  </testcase>");
            }
            (e, v) => {
                let name = e.name().unwrap_or_default();
                let prefix = if matches!(v, Verdict::ExpectedFailure(_)) { "expected failure: " } else { "" };
                let _ = writeln!(s, ">\n    <{name} message=\"{prefix}{detail}\"/>\n  </testcase>");
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
        let e = Expectations::parse("noreason\n").unwrap_err();
        assert_eq!(e, ReportError::NoReason { line: 1, name: "noreason".into() });
        assert!(e.to_string().contains("no reason"));
    }

    #[test]
    fn a_listed_scenario_that_never_ran_stays_a_failure() {
        let e = Expectations::parse("room sends 16\n").unwrap();
        let mut a = r("room", Verdict::Fail("the gateway did not come up".into()));
        e.apply_if_ran(&mut a, false);
        assert_eq!(
            a.verdict,
            Verdict::Fail(
                "the gateway did not come up (listed as an expected failure, \"sends 16\", but it never ran)".into()
            )
        );
        let mut b = r("room", Verdict::Fail("sent 16".into()));
        e.apply_if_ran(&mut b, true);
        assert_eq!(b.verdict.label(), "expected failure");
        let mut c = r("other", Verdict::Fail("down".into()));
        e.apply_if_ran(&mut c, false);
        assert_eq!(c.verdict, Verdict::Fail("down".into()));
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
