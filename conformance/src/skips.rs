//! Skips that cannot hide: `--deny-skips` and the expected-skips list.
//!
//! A case of a dialect, version or kind this build does not support is
//! skipped with its reason (docs/case-format.md §5.2, §9.4). A corpus meant to be fully
//! supported must be able to fail on skips, so:
//!
//! - with `deny` set, every skip that the expected-skips list does not name
//!   becomes a failure;
//! - the expected-skips list (in the spirit of BoGo's disabled tests and
//!   prost's `failing_tests.txt`) names each case that may be skipped, with
//!   a reason; an entry whose case is not skipped (it now passes, fails, or
//!   no longer exists) is *stale* and fails the run, so the list cannot rot.
//!
//! List format: one entry per line, `<case id> <reason>`, the case id as
//! reports print it (`vllm/0.33.0/request/add_default`); `#` starts a
//! comment line; blank lines are ignored. A reason is required.

use std::path::{Path, PathBuf};

use crate::check::Verdict;
use crate::report::CaseResult;

/// One entry of an expected-skips list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedSkip {
    pub case: String,
    pub reason: String,
    /// 1-based line in the list, for messages.
    pub line: usize,
}

/// Why an expected-skips list could not be read: the line, or the file.
#[derive(Debug, thiserror::Error)]
pub enum SkipsError {
    /// An entry without a reason.
    #[error("line {line}: `{text}` has no reason (`<case id> <reason>`)")]
    NoReason { line: usize, text: String },
    /// A case listed twice.
    #[error("line {line}: {case} is already listed on line {first}")]
    Duplicate { line: usize, case: String, first: usize },
    /// The list file could not be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The list file read, but does not parse.
    #[error("{}: {error}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        error: Box<SkipsError>,
    },
}

/// An expected-skips list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedSkips {
    pub entries: Vec<ExpectedSkip>,
}

impl ExpectedSkips {
    /// Parses a list; errors name the line.
    pub fn parse(text: &str) -> Result<Self, SkipsError> {
        let mut entries: Vec<ExpectedSkip> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (case, reason) = match line.split_once(char::is_whitespace) {
                Some((c, r)) if !r.trim().is_empty() => (c.to_string(), r.trim().to_string()),
                _ => return Err(SkipsError::NoReason { line: i + 1, text: line.to_string() }),
            };
            if let Some(prev) = entries.iter().find(|e| e.case == case) {
                return Err(SkipsError::Duplicate { line: i + 1, case, first: prev.line });
            }
            entries.push(ExpectedSkip { case, reason, line: i + 1 });
        }
        Ok(ExpectedSkips { entries })
    }

    /// Reads and parses a list file.
    pub fn load(path: &Path) -> Result<Self, SkipsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SkipsError::Read { path: path.into(), source })?;
        Self::parse(&text).map_err(|error| SkipsError::Parse { path: path.into(), error: Box::new(error) })
    }

    fn find(&self, case: &str) -> Option<&ExpectedSkip> {
        self.entries.iter().find(|e| e.case == case)
    }
}

/// Applies the skip policy to a run's results: unlisted skips fail when
/// `deny` is set; stale entries of `expected` are appended as failures
/// (group `expected-skips`).
pub fn apply(results: &mut Vec<CaseResult>, deny: bool, expected: &ExpectedSkips) {
    for r in results.iter_mut() {
        if let Verdict::Skip(why) = &r.verdict {
            if deny && expected.find(&r.id).is_none() {
                r.verdict = Verdict::Fail(format!("skipped ({why}), and skips are denied (--deny-skips)"));
            }
        }
    }
    for e in &expected.entries {
        let stale = match results.iter().find(|r| r.id == e.case) {
            None => Some("no such case in the corpus".to_string()),
            Some(r) => match &r.verdict {
                Verdict::Skip(_) => None,
                Verdict::Pass | Verdict::Drift(_) => Some("the case now passes".to_string()),
                Verdict::Fail(why) | Verdict::ExpectedFailure(why) => {
                    Some(format!("the case is checked and fails: {why}"))
                }
            },
        };
        if let Some(why) = stale {
            results.push(CaseResult {
                id: format!("expected-skip {}", e.case),
                file: format!("expected-skips line {}", e.line),
                group: "expected-skips".into(),
                verdict: Verdict::Fail(format!("stale expected skip ({}): {why}", e.reason)),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, verdict: Verdict) -> CaseResult {
        CaseResult { id: id.into(), file: String::new(), group: "g".into(), verdict }
    }

    #[test]
    fn an_entry_without_a_reason_is_an_error_naming_its_line() {
        let e = ExpectedSkips::parse("# comment\n\nvllm/0.33.0/a\n").unwrap_err();
        assert!(matches!(&e, SkipsError::NoReason { line: 3, text } if text == "vllm/0.33.0/a"), "{e}");
        assert!(e.to_string().starts_with("line 3:"), "{e}");
    }

    #[test]
    fn a_duplicate_entry_is_an_error() {
        let e = ExpectedSkips::parse("a one\na two\n").unwrap_err();
        assert!(matches!(&e, SkipsError::Duplicate { line: 2, case, first: 1 } if case == "a"), "{e}");
    }

    #[test]
    fn denied_skips_fail_unless_listed() {
        let list = ExpectedSkips::parse("vllm/9.9.9/x no schema for 9.9.9 yet\n").unwrap();
        let mut rs =
            vec![result("vllm/9.9.9/x", Verdict::Skip("no schema".into())), result("y", Verdict::Skip("k".into()))];
        apply(&mut rs, true, &list);
        assert_eq!(rs[0].verdict, Verdict::Skip("no schema".into()));
        assert!(matches!(&rs[1].verdict, Verdict::Fail(w) if w.contains("--deny-skips")));
        assert_eq!(rs.len(), 2, "no stale entry");
    }

    #[test]
    fn skips_stay_skips_when_not_denied() {
        let mut rs = vec![result("y", Verdict::Skip("k".into()))];
        apply(&mut rs, false, &ExpectedSkips::default());
        assert_eq!(rs[0].verdict, Verdict::Skip("k".into()));
    }

    #[test]
    fn a_listed_case_that_passes_or_is_missing_is_a_stale_entry() {
        let list = ExpectedSkips::parse("a reason a\nmissing reason m\n").unwrap();
        let mut rs = vec![result("a", Verdict::Pass)];
        apply(&mut rs, false, &list);
        let stale: Vec<_> = rs.iter().filter(|r| r.group == "expected-skips").collect();
        assert_eq!(stale.len(), 2);
        assert!(matches!(&stale[0].verdict, Verdict::Fail(w) if w.contains("now passes")));
        assert!(matches!(&stale[1].verdict, Verdict::Fail(w) if w.contains("no such case")));
    }
}
