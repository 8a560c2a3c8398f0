//! The campaign's report and its judgement: the explained misses
//! (`golden/gateway/planted-explained.txt`), the report `gpu-runner
//! planted --report-json` writes (`golden/gateway/reports/planted-*.json`),
//! read back by the scoreboard and the report site, and its scoreboard
//! section.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::{Bug, Clean, Outcome};
use crate::gateway::differential::DiffProbe;
use crate::scoreboard::cell;

/// The misses the project explains (`<bug name> -- <why>` per line, `#`
/// comments): `golden/gateway/planted-explained.txt`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explained {
    /// Bug name -> (line, reason).
    pub reasons: BTreeMap<String, (usize, String)>,
}

/// A line of the explanations that is not `<bug name> -- <why>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct ExplainedError {
    pub line: usize,
    pub why: String,
}

impl Explained {
    pub fn parse(text: &str) -> Result<Explained, ExplainedError> {
        let mut reasons = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let Some((name, why)) = l.split_once(" -- ") else {
                return Err(ExplainedError {
                    line: line_no,
                    why: "expected `<bug name> -- <why it is missed>`".into(),
                });
            };
            if why.trim().is_empty() {
                return Err(ExplainedError { line: line_no, why: "no reason given".into() });
            }
            if reasons.insert(name.trim().to_string(), (line_no, why.trim().to_string())).is_some() {
                return Err(ExplainedError { line: line_no, why: format!("{} listed twice", name.trim()) });
            }
        }
        Ok(Explained { reasons })
    }
}

/// The campaign's verdict against the explanations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    /// Missed and not explained.
    pub unexplained: Vec<String>,
    /// Explained lines that are stale: the bug was found, or there is no
    /// such bug (judged on a whole campaign only).
    pub stale: Vec<String>,
}

/// Judges `results` (bug name, outcome) against `explained`; `whole`: every
/// bug of the release was run.
pub fn judge(results: &[(Bug, Outcome)], explained: &Explained, whole: bool) -> Judged {
    let mut j = Judged::default();
    for (bug, o) in results {
        let listed = explained.reasons.get(&bug.name);
        match (o, listed) {
            (Outcome::Missed { .. }, None) => j.unexplained.push(bug.name.clone()),
            (Outcome::Found { .. }, Some((line, _))) => {
                j.stale.push(format!("line {line}: {} is found now", bug.name));
            }
            _ => {}
        }
    }
    if whole {
        for (name, (line, _)) in &explained.reasons {
            if !results.iter().any(|(b, _)| &b.name == name) {
                j.stale.push(format!("line {line}: no bug is named {name}"));
            }
        }
    }
    j
}

/// A bug's outcome as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutcomeLabel {
    #[serde(rename = "found")]
    Found,
    #[serde(rename = "missed")]
    Missed,
    #[serde(rename = "not planted")]
    NotPlanted,
}

/// The campaign's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    pub bugs: usize,
    /// Found plus missed: the bugs that changed what passed.
    pub planted: usize,
    pub found: usize,
    pub missed: usize,
    /// The missed bugs `golden/gateway/planted-explained.txt` explains.
    pub missed_explained: usize,
    pub not_planted: usize,
}

/// One bug's row of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BugRow {
    pub bug: String,
    pub outcome: OutcomeLabel,
    /// Found: the probe that showed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Json>,
    /// Found: where the probe differed (the first six paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
    /// Missed: the probes it was planted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Json>,
    /// Missed: why, from the explanations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
    /// Not planted: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The report `gpu-runner planted --report-json` writes
/// (`golden/gateway/reports/planted-<gateway>.json`), read back by the
/// scoreboard and the report site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantedReport {
    /// Both sides' gateway (one of vLLM's frontends).
    pub gateway: String,
    /// The release whose tables the bugs come from.
    pub release: String,
    pub probes: usize,
    /// Probes left out (both sides refuse them, or they differ already), with why.
    pub noisy_probes: Vec<Json>,
    pub totals: Totals,
    pub bugs: Vec<BugRow>,
}

impl OutcomeLabel {
    /// The name the report writes.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeLabel::Found => "found",
            OutcomeLabel::Missed => "missed",
            OutcomeLabel::NotPlanted => "not planted",
        }
    }
}

impl PlantedReport {
    /// Found over planted, in percent (100 when nothing was planted).
    pub fn found_percent(&self) -> f64 {
        if self.totals.planted == 0 {
            100.0
        } else {
            100.0 * self.totals.found as f64 / self.totals.planted as f64
        }
    }
}

/// The campaign's report.
pub fn report(
    gateway: &str,
    release: &str,
    probes: &[DiffProbe],
    clean: &[Clean],
    results: &[(Bug, Outcome)],
    explained: &Explained,
) -> PlantedReport {
    let count = |l| results.iter().filter(|(_, o)| o.label() == l).count();
    let (found, missed, not_planted) =
        (count(OutcomeLabel::Found), count(OutcomeLabel::Missed), count(OutcomeLabel::NotPlanted));
    let missed_explained = results
        .iter()
        .filter(|(b, o)| matches!(o, Outcome::Missed { .. }) && explained.reasons.contains_key(&b.name))
        .count();
    let probe = |i: usize| {
        let p = &probes[i];
        json!({"endpoint": p.endpoint.path(), "stream": p.stream, "field": p.field, "value": p.value})
    };
    let row = |b: &Bug, o: &Outcome| {
        let mut r = BugRow {
            bug: b.name.clone(),
            outcome: o.label(),
            probe: None,
            differences: Vec::new(),
            probes: Vec::new(),
            explained: None,
            why: None,
        };
        match o {
            Outcome::Found { probe: i, differences } => {
                r.probe = Some(probe(*i));
                r.differences = differences.iter().take(6).cloned().collect();
            }
            Outcome::Missed { probes: ps } => {
                r.probes = ps.iter().map(|i| probe(*i)).collect();
                r.explained = explained.reasons.get(&b.name).map(|(_, why)| why.clone());
            }
            Outcome::NotPlanted(why) => r.why = Some(why.clone()),
        }
        r
    };
    PlantedReport {
        gateway: gateway.into(),
        release: release.into(),
        probes: probes.len(),
        noisy_probes: clean
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let why = c.noisy.as_ref()?;
                let mut v = probe(i);
                v["why"] = json!(why);
                Some(v)
            })
            .collect(),
        totals: Totals { bugs: results.len(), planted: found + missed, found, missed, missed_explained, not_planted },
        bugs: results.iter().map(|(b, o)| row(b, o)).collect(),
    }
}

/// The scoreboard's "Planted bugs" section: a campaign's counts and every
/// missed bug with its explanation (docs/planted-bugs.md).
pub fn markdown(file: &str, r: &PlantedReport) -> String {
    let t = &r.totals;
    let mut s = String::new();
    s.push_str("\n## Planted bugs\n\n");
    s.push_str(
        "Generated by `gpu-runner scoreboard --planted` from `gpu-runner planted` reports \
         (docs/planted-bugs.md); do not edit by hand. Two copies of one of vLLM's frontends, each with the \
         mock engine; between the second and its engine the fault wire plants one bug at a time (every \
         field of the ADD and of the outputs, from the release's tables, set to its default and to another \
         value; the last two alternatives of each logprob row swapped; ABORTs withheld; the answer's text \
         altered), and the differential's probes tell whether it shows. A bug no probe gives a value to \
         change is not planted.\n\n",
    );
    s.push_str("| gateway | release | bugs | planted | found | missed (explained) | not planted | report |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} ({:.1} %) | {} ({}) | {} | `{}` |",
        cell(&r.gateway),
        cell(&r.release),
        t.bugs,
        t.planted,
        t.found,
        r.found_percent(),
        t.missed,
        t.missed_explained,
        t.not_planted,
        cell(file)
    );
    let missed: Vec<_> = r.bugs.iter().filter(|b| b.outcome == OutcomeLabel::Missed).collect();
    if !missed.is_empty() {
        s.push_str("\n| missed bug | why no check sees it |\n| --- | --- |\n");
        for b in missed {
            let _ =
                writeln!(s, "| `{}` | {} |", cell(&b.bug), cell(b.explained.as_deref().unwrap_or("**not explained**")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::Plant;
    use super::*;

    #[test]
    fn a_report_reads_back_as_written_and_an_unknown_outcome_is_refused() {
        let probes = vec![DiffProbe {
            endpoint: crate::gateway::Endpoint::Completions,
            stream: false,
            field: None,
            value: Json::Null,
            body: json!({}),
        }];
        let clean = vec![Clean::default()];
        let bug = |n: &str| Bug { name: n.into(), plant: Plant::HttpText };
        let results = vec![
            (bug("a"), Outcome::Found { probe: 0, differences: vec!["response.x".into()] }),
            (bug("b"), Outcome::Missed { probes: vec![0] }),
            (bug("c"), Outcome::NotPlanted("no probe".into())),
        ];
        let e = Explained::parse("b -- why b").unwrap();
        let r = report("g", "0.32.0", &probes, &clean, &results, &e);
        assert_eq!(r.totals, Totals { bugs: 3, planted: 2, found: 1, missed: 1, missed_explained: 1, not_planted: 1 });
        assert_eq!(r.found_percent(), 50.0);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<PlantedReport>(&text).unwrap(), r);
        let bad = text.replace("\"missed\"", "\"lost\"");
        assert!(serde_json::from_str::<PlantedReport>(&bad).is_err());
    }

    #[test]
    fn a_missed_bug_fails_unless_explained_and_an_explanation_of_a_found_or_unknown_bug_is_stale() {
        let bug = |n: &str| Bug { name: n.into(), plant: Plant::HttpText };
        let results = vec![
            (bug("a"), Outcome::Missed { probes: vec![0] }),
            (bug("b"), Outcome::Missed { probes: vec![0] }),
            (bug("c"), Outcome::Found { probe: 0, differences: vec!["response.x".into()] }),
        ];
        let e = Explained::parse("# why\na -- reason a\nc -- reason c\nzzz -- gone\n").unwrap();
        let j = judge(&results, &e, true);
        assert_eq!(j.unexplained, vec!["b".to_string()]);
        assert_eq!(j.stale, vec!["line 3: c is found now".to_string(), "line 4: no bug is named zzz".to_string()]);
        assert_eq!(judge(&results, &e, false).stale.len(), 1, "an unknown name is judged on a whole campaign only");
        assert_eq!(Explained::parse("a reason without the separator").unwrap_err().line, 1);
        assert!(Explained::parse("a -- x\na -- y").is_err());
    }

    #[test]
    fn the_planted_section_gives_the_found_share_and_names_an_unexplained_miss() {
        let row = |bug: &str, outcome, explained: Option<&str>| BugRow {
            bug: bug.into(),
            outcome,
            probe: None,
            differences: vec![],
            probes: vec![],
            explained: explained.map(String::from),
            why: None,
        };
        let r = PlantedReport {
            gateway: "vllm-0.32.0".into(),
            release: "0.32.0".into(),
            probes: 10,
            noisy_probes: vec![],
            totals: Totals { bugs: 4, planted: 3, found: 1, missed: 2, missed_explained: 1, not_planted: 1 },
            bugs: vec![
                row("add a -> other", OutcomeLabel::Found, None),
                row("add b -> other", OutcomeLabel::Missed, Some("metrics only")),
                row("add c -> other", OutcomeLabel::Missed, None),
                row("add d -> other", OutcomeLabel::NotPlanted, None),
            ],
        };
        let md = markdown("planted-vllm-0.32.0.json", &r);
        assert!(
            md.contains("| vllm-0.32.0 | 0.32.0 | 4 | 3 | 1 (33.3 %) | 2 (1) | 1 | `planted-vllm-0.32.0.json` |"),
            "{md}"
        );
        assert!(md.contains("| `add b -> other` | metrics only |"), "{md}");
        assert!(md.contains("| `add c -> other` | **not explained** |"), "{md}");
        assert!(!md.contains("add a -> other") && !md.contains("add d -> other"), "only misses are listed: {md}");
    }

    #[test]
    fn an_outcome_prints_as_the_report_names_it() {
        for l in [OutcomeLabel::Found, OutcomeLabel::Missed, OutcomeLabel::NotPlanted] {
            assert_eq!(serde_json::to_value(l).unwrap(), json!(l.as_str()));
        }
    }
}
