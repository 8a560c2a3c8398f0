//! Loading golden cases (docs/case-format.md §9.1): every `*.json` file
//! below a directory that has a `"case"` key. A file that is not JSON, or a
//! case missing a contract key, is a load error naming the file, reported as
//! a failure, never skipped.
//!
//! The walk and the parser are `engine_testkit::corpus`'s, shared with the
//! tests and the fuzz seed writer; this module fixes which gateway kinds
//! this build checks ([`crate::kinds::KNOWN`]): a case of another kind is
//! `Body::Unsupported` (skipped with the reason).

use std::path::Path;

pub use engine_testkit::corpus::{
    json_files, Body, Case, CaseError, CaseKeyError, CorpusError, CorpusLoadError, EncodeMode, Expect,
};
use serde_json::Value as Json;

/// The cases and load errors under `dir`, in path order.
pub fn load(dir: &Path) -> Result<(Vec<Case>, Vec<CorpusLoadError>), CorpusError> {
    engine_testkit::corpus::load(dir, crate::kinds::KNOWN)
}

/// Parses one case object; errors say which key is wrong.
pub fn parse_case(file: &Path, json: &Json) -> Result<Case, CaseError> {
    engine_testkit::corpus::parse_case(file, json, crate::kinds::KNOWN)
}
