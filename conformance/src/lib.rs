//! `conformance`: the harness around `engine-protocol`. Loads golden corpora
//! written to docs/case-format.md ([`corpus`]), checks every case
//! against the reference implementation ([`check`]) or, for message cases,
//! against an outside codec speaking the testee protocol of docs/testee.md
//! ([`testee`]; both through the [`codec::Codec`] interface), reports as a
//! table, JSON or JUnit ([`report`]) and times the codec on any corpus
//! ([`mod@bench`]). Corpus walking, case parsing and the outcome
//! classification are `engine-testkit`'s, shared with the runner and the
//! fuzz crate.

pub mod bench;
pub mod check;
pub mod codec;
pub mod compat;
pub mod corpus;
pub mod kinds;
pub mod report;
pub mod schema_diff;
pub mod skips;
pub mod testee;

use std::path::Path;

use check::Verdict;
use report::CaseResult;

/// The group of a case for reports: `<dialect>/<version>/<group>` where the
/// group is the first segment of the case id.
pub fn group_of(case: &corpus::Case) -> String {
    case.group()
}

/// Loads and checks every case under `dir` against the reference
/// implementation, in process. Load errors become failures naming their
/// file.
pub fn verify_dir(dir: &Path) -> Result<Vec<CaseResult>, corpus::CorpusError> {
    verify_dir_with(dir, check::check)
}

/// Loads every case under `dir` and judges each with `check`, in path
/// order. Load errors and duplicate case ids become failures, whatever
/// `check` is.
pub fn verify_dir_with(
    dir: &Path,
    mut check: impl FnMut(&corpus::Case) -> Verdict,
) -> Result<Vec<CaseResult>, corpus::CorpusError> {
    let (cases, errors) = corpus::load(dir)?;
    let mut results: Vec<CaseResult> = errors
        .into_iter()
        .map(|e| CaseResult {
            id: e.file.display().to_string(),
            file: e.file.display().to_string(),
            group: "load".into(),
            verdict: Verdict::Fail(format!("malformed case file: {}", e.error)),
        })
        .collect();
    let mut seen = std::collections::HashMap::new();
    for case in &cases {
        let key = (case.dialect.clone(), case.version.clone(), case.id.clone());
        let verdict = match seen.insert(key, case.file.clone()) {
            Some(other) => Verdict::Fail(format!("duplicate case id (also in {})", other.display())),
            None => check(case),
        };
        results.push(CaseResult {
            id: check::report_id(case),
            file: case.file.display().to_string(),
            group: group_of(case),
            verdict,
        });
    }
    Ok(results)
}
