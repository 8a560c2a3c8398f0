//! The one outcome classification of the suite: what `conformance verify`
//! says of a golden case, what the runner says of a scenario, what the fuzz
//! seed tests say of a seed. Five outcomes (docs/runner/README.md "Reports",
//! docs/case-format.md §9):
//!
//! - `pass`: every check held;
//! - `fail`: some check did not hold (with why);
//! - `expected failure`: failed, and an expectations list names it with a
//!   reason (the runner's expectations file);
//! - `drift`: the checks held, but the engine sent fields the schema does
//!   not know (the decoder's drift paths, `engine_protocol::Outcome`);
//! - `skip`: not checked, with the reason (never silent).
//!
//! [`Verdict::label`] is the one name of each outcome, in text reports and
//! in JSON (`status` of `conformance verify --format json`, `outcome` of the
//! runner's `--report-json`); [`Verdict::junit`] is how JUnit XML carries it.
//!
//! A different thing is what the *engine* said of a message: accept, or
//! reject with a class. That is [`EngineVerdict`], the `expect` of a golden
//! case (docs/case-format.md §4, classes §5) and the oracle of the fuzz seed tests.

use std::fmt;

use engine_protocol::{Outcome, RejectClass};
use serde_json::Value as Json;

/// The outcome of one check run: a case, a scenario, a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    /// Failed, and listed as expected to fail with this reason.
    ExpectedFailure(String),
    /// Passed, but the engine sent fields the schema does not know: the
    /// drift paths.
    Drift(Vec<String>),
    /// Not checked, with the reason.
    Skip(String),
}

/// How JUnit XML carries a verdict: the child element of `<testcase>`, if
/// any, and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JunitElement {
    /// No child: a plain pass.
    None,
    /// `<failure message=...>`.
    Failure,
    /// `<skipped message=...>` (skips and expected failures: neither counts
    /// as a failure in CI).
    Skipped,
    /// `<system-out>` (drift passes, the paths are kept visible).
    SystemOut,
}

impl JunitElement {
    /// The element name, `None` for a plain pass.
    pub fn name(self) -> Option<&'static str> {
        match self {
            JunitElement::None => None,
            JunitElement::Failure => Some("failure"),
            JunitElement::Skipped => Some("skipped"),
            JunitElement::SystemOut => Some("system-out"),
        }
    }
}

impl Verdict {
    /// Every label, in report order.
    pub const LABELS: [&'static str; 5] = ["pass", "fail", "expected failure", "drift", "skip"];

    /// The outcome's name in text and JSON reports.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::ExpectedFailure(_) => "expected failure",
            Verdict::Drift(_) => "drift",
            Verdict::Skip(_) => "skip",
        }
    }

    /// The reason, the failure or the drift paths; `None` for a pass.
    pub fn detail(&self) -> Option<String> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail(d) | Verdict::ExpectedFailure(d) | Verdict::Skip(d) => Some(d.clone()),
            Verdict::Drift(p) => Some(p.join(", ")),
        }
    }

    /// Whether the verdict fails a run (only `fail` does).
    pub fn is_failure(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }

    /// The JUnit element that carries this verdict.
    pub fn junit(&self) -> JunitElement {
        match self {
            Verdict::Pass => JunitElement::None,
            Verdict::Fail(_) => JunitElement::Failure,
            Verdict::ExpectedFailure(_) | Verdict::Skip(_) => JunitElement::Skipped,
            Verdict::Drift(_) => JunitElement::SystemOut,
        }
    }

    /// From the failures of a run's checks and the decoder's drift paths:
    /// any failure is `fail`; otherwise drift (as
    /// [`engine_protocol::Outcome::is_drift`] decides) is `drift`, and
    /// nothing is `pass`.
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

    /// The verdict after an expectations list had its say: a listed failure
    /// becomes an expected failure (`reason (what failed)`); a listed pass
    /// or drift is a failure, so the list cannot rot; a skip stays a skip.
    pub fn expected_to_fail(&self, reason: &str) -> Verdict {
        match self {
            Verdict::Fail(d) => Verdict::ExpectedFailure(format!("{reason} ({d})")),
            Verdict::Pass | Verdict::Drift(_) => {
                Verdict::Fail(format!("listed as expected to fail ({reason}) but passed: remove it from the list"))
            }
            other => other.clone(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.detail() {
            Some(d) => write!(f, "{}: {d}", self.label()),
            None => f.write_str(self.label()),
        }
    }
}

/// Counts of each outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub expected_failures: usize,
    pub drift: usize,
    pub skipped: usize,
}

impl Totals {
    /// Counts `v`.
    pub fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail(_) => self.failed += 1,
            Verdict::ExpectedFailure(_) => self.expected_failures += 1,
            Verdict::Drift(_) => self.drift += 1,
            Verdict::Skip(_) => self.skipped += 1,
        }
    }

    /// The totals of `verdicts`.
    pub fn of<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> Totals {
        let mut t = Totals::default();
        verdicts.into_iter().for_each(|v| t.add(v));
        t
    }

    /// Every verdict counted.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.expected_failures + self.drift + self.skipped
    }

    /// The closing line of every report:
    /// `N passed, M failed[, K expected failures][, D drift][, S skipped]`
    /// (the optional parts only when not zero).
    pub fn summary_line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if self.expected_failures > 0 {
            s.push_str(&format!(", {} expected failures", self.expected_failures));
        }
        if self.drift > 0 {
            s.push_str(&format!(", {} drift", self.drift));
        }
        if self.skipped > 0 {
            s.push_str(&format!(", {} skipped", self.skipped));
        }
        s
    }

    /// The totals as the JSON reports write them.
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "passed": self.passed,
            "failed": self.failed,
            "expected_failures": self.expected_failures,
            "drift": self.drift,
            "skipped": self.skipped,
        })
    }
}

/// Text escaped for an XML attribute or element: the five markup
/// characters as entities; control characters XML 1.0 cannot carry (all
/// below U+0020 but tab, line feed and carriage return) as spaces.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Why a case's `expect` is not a verdict ([`EngineVerdict::from_json`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpectError {
    /// An object without a string `reject`.
    #[error("`expect` object needs `reject`")]
    NoRejectClass,
    /// `reject` names no class of docs/case-format.md §5.1.
    #[error("unknown reject class `{class}`")]
    UnknownRejectClass { class: String },
    /// Neither `"accept"` nor an object.
    #[error("`expect` must be \"accept\" or {{\"reject\": CLASS}}")]
    NotAVerdict,
}

/// What the engine's own decoder said of a message (docs/case-format.md
/// §4: a case's `expect`): accepted, or rejected with a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineVerdict {
    Accept,
    Reject(RejectClass),
}

impl EngineVerdict {
    /// Reads a case's `expect`: `"accept"` or `{"reject": CLASS}`.
    pub fn from_json(j: &Json) -> Result<EngineVerdict, ExpectError> {
        match j {
            Json::String(s) if s == "accept" => Ok(EngineVerdict::Accept),
            Json::Object(m) => {
                let class = m.get("reject").and_then(Json::as_str).ok_or(ExpectError::NoRejectClass)?;
                RejectClass::parse(class)
                    .map(EngineVerdict::Reject)
                    .ok_or_else(|| ExpectError::UnknownRejectClass { class: class.to_string() })
            }
            _ => Err(ExpectError::NotAVerdict),
        }
    }

    /// The `expect` JSON of this verdict.
    pub fn to_json(&self) -> Json {
        match self {
            EngineVerdict::Accept => Json::from("accept"),
            EngineVerdict::Reject(c) => serde_json::json!({ "reject": c.as_str() }),
        }
    }

    /// `accept` or the reject class's name (`type`, `frames`, ...).
    pub fn label(&self) -> &'static str {
        match self {
            EngineVerdict::Accept => "accept",
            EngineVerdict::Reject(c) => c.as_str(),
        }
    }

    /// Whether a decoder's outcome is this verdict: an accept (with any
    /// drift) for `Accept`, a reject of the same class for `Reject`.
    pub fn agrees_with(&self, outcome: &Outcome) -> bool {
        match (self, outcome) {
            (EngineVerdict::Accept, Outcome::Accept { .. }) => true,
            (EngineVerdict::Reject(want), Outcome::Reject(got)) => want == got,
            _ => false,
        }
    }

    /// The opposite claim, for tests that check an oracle notices a wrong
    /// verdict: a `type` reject for an accept, an accept for a reject.
    pub fn wrong(&self) -> EngineVerdict {
        match self {
            EngineVerdict::Accept => EngineVerdict::Reject(RejectClass::Type),
            EngineVerdict::Reject(_) => EngineVerdict::Accept,
        }
    }
}

impl fmt::Display for EngineVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineVerdict::Accept => f.write_str("accept"),
            EngineVerdict::Reject(c) => write!(f, "reject {c}"),
        }
    }
}
