//! Known findings of a differential run, one per line:
//! `<field> <endpoint> <reason>`, where `field` is a request field (or
//! `base` for the base request alone) and `endpoint` is `completions`,
//! `chat` or `*`. A probe that differs is expected when a line names its
//! field and endpoint; a line whose field was probed on its endpoints with
//! no difference is stale, and fails the run as an unexpected difference
//! does, so the list cannot go stale. Lines starting with `#` and blank
//! lines are ignored.

use super::differential::{ProbeResult, ProbeVerdict};
use super::scenario::Endpoint;

/// One known finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The field, or `base`.
    pub field: String,
    /// `None`: both endpoints.
    pub endpoint: Option<Endpoint>,
    pub reason: String,
    /// Its line number (for errors).
    pub line: usize,
}

/// A known-findings file, read.
#[derive(Debug, Clone, Default)]
pub struct DiffExpectations(pub Vec<Known>);

/// A line that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct ExpectationError {
    pub line: usize,
    pub why: String,
}

/// What a run's results come to against the known findings.
#[derive(Debug, Default)]
pub struct Judged<'a> {
    /// Probes that differ with no line naming them.
    pub unexpected: Vec<&'a ProbeResult>,
    /// Probes that differ as a line says.
    pub expected: Vec<&'a ProbeResult>,
    /// Lines whose field was probed and never differed.
    pub stale: Vec<Known>,
}

fn differs(r: &ProbeResult) -> bool {
    !matches!(r.verdict, ProbeVerdict::Same | ProbeVerdict::BothRefused)
}

fn field_of(r: &ProbeResult) -> &str {
    r.probe.field.as_deref().unwrap_or("base")
}

impl DiffExpectations {
    pub fn parse(text: &str) -> Result<DiffExpectations, ExpectationError> {
        let mut out = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let line = i + 1;
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut parts = l.splitn(3, ' ');
            let (Some(field), Some(ep), Some(reason)) = (parts.next(), parts.next(), parts.next()) else {
                return Err(ExpectationError { line, why: "expected `<field> <endpoint> <reason>`".into() });
            };
            let endpoint = match ep {
                "completions" => Some(Endpoint::Completions),
                "chat" => Some(Endpoint::Chat),
                "*" => None,
                o => {
                    return Err(ExpectationError {
                        line,
                        why: format!("endpoint {o:?}: expected completions, chat or *"),
                    })
                }
            };
            if out.iter().any(|k: &Known| k.field == field && k.endpoint == endpoint) {
                return Err(ExpectationError { line, why: format!("{field} {ep} is listed twice") });
            }
            out.push(Known { field: field.into(), endpoint, reason: reason.trim().into(), line });
        }
        Ok(DiffExpectations(out))
    }

    /// Whether a line names `field` on `endpoint`.
    pub fn lists(&self, field: &str, endpoint: Endpoint) -> bool {
        self.0.iter().any(|k| k.field == field && k.endpoint.is_none_or(|e| e == endpoint))
    }

    fn covers(k: &Known, r: &ProbeResult) -> bool {
        k.field == field_of(r) && k.endpoint.is_none_or(|e| e == r.probe.endpoint)
    }

    /// Sorts the results into unexpected and expected differences, and
    /// finds the stale lines when `whole` (every value of every field was
    /// probed: a sample may miss the one value a field differs at, so a
    /// sampled run judges no line stale; the whole sweep does).
    pub fn judge<'a>(&self, results: &'a [ProbeResult], whole: bool) -> Judged<'a> {
        let mut j = Judged::default();
        for r in results.iter().filter(|r| differs(r)) {
            if self.0.iter().any(|k| Self::covers(k, r)) {
                j.expected.push(r);
            } else {
                j.unexpected.push(r);
            }
        }
        for k in self.0.iter().filter(|_| whole) {
            let probed: Vec<&ProbeResult> = results.iter().filter(|r| Self::covers(k, r)).collect();
            if !probed.is_empty() && !probed.iter().any(|r| differs(r)) {
                j.stale.push(k.clone());
            }
        }
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::differential::{DiffProbe, Difference};
    use serde_json::json;

    fn result(field: Option<&str>, ep: Endpoint, differs: bool) -> ProbeResult {
        ProbeResult {
            probe: DiffProbe {
                endpoint: ep,
                stream: false,
                field: field.map(str::to_string),
                value: json!(1),
                body: json!({}),
            },
            verdict: if differs {
                ProbeVerdict::Differs(vec![Difference { path: "x".into(), reference: json!(1), test: json!(2) }])
            } else {
                ProbeVerdict::Same
            },
        }
    }

    #[test]
    fn a_listed_difference_is_expected_an_unlisted_one_is_not_and_a_listed_one_that_agrees_is_stale() {
        let e =
            DiffExpectations::parse("# known\nignore_eos * dropped\nbase completions output_kind 0\nn chat refused\n")
                .unwrap();
        let rs = vec![
            result(Some("ignore_eos"), Endpoint::Chat, true),
            result(None, Endpoint::Completions, true),
            result(Some("top_k"), Endpoint::Completions, true),
            result(Some("n"), Endpoint::Chat, false),
            result(Some("n"), Endpoint::Completions, true),
        ];
        let j = e.judge(&rs, true);
        assert!(e.judge(&rs, false).stale.is_empty(), "a sample judges no line stale");
        assert_eq!(j.expected.len(), 2);
        let unexpected: Vec<_> = j.unexpected.iter().map(|r| (field_of(r), r.probe.endpoint)).collect();
        assert_eq!(unexpected, [("top_k", Endpoint::Completions), ("n", Endpoint::Completions)]);
        assert_eq!(j.stale.iter().map(|k| k.line).collect::<Vec<_>>(), [4], "n chat agreed");
    }

    #[test]
    fn a_line_for_a_field_not_probed_is_not_stale() {
        let e = DiffExpectations::parse("seed * something\n").unwrap();
        assert!(e.judge(&[result(Some("top_k"), Endpoint::Chat, false)], true).stale.is_empty());
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        assert_eq!(DiffExpectations::parse("x\n").unwrap_err().line, 1);
        let e = DiffExpectations::parse("# c\nx nowhere why\n").unwrap_err();
        assert_eq!((e.line, e.why.contains("nowhere")), (2, true));
        assert!(DiffExpectations::parse("x * a\nx * b\n").unwrap_err().why.contains("twice"));
    }
}
