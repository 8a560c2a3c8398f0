//! `expectations_file`: one file's bytes as each kind of known-failures
//! list: the expectations of a replay or gateway run
//! (`report::Expectations`, `golden/replay/expectations/`,
//! `golden/gateway/expectations/`: `<scenario> <reason>` per line) and the
//! known findings of a differential run
//! (`gateway::diff_expectations::DiffExpectations`,
//! `golden/gateway/differential/`: `<field> <endpoint> <reason>`).
//!
//! Bytes that are not UTF-8 stop here (`untrusted::read_text` refuses
//! them). Checked beyond "no panic":
//! - an accepted list has one entry per line that is neither blank nor a
//!   `#` comment, each with a name free of whitespace (a field free of
//!   spaces) and a reason that is trimmed and not empty;
//! - written back one entry a line (`name reason`, `field endpoint
//!   reason`), it parses to the same entries;
//! - a differential list names each (field, endpoint) once, and its line
//!   numbers point at the lines the entries came from;
//! - a refusal names a line of the file.

use gpu_runner::gateway::diff_expectations::{DiffExpectations, Known};
use gpu_runner::gateway::Endpoint;
use gpu_runner::report::{Expectations, ReportError};

/// The lines that hold an entry.
fn entry_lines(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

fn endpoint_name(e: Option<Endpoint>) -> &'static str {
    match e {
        Some(Endpoint::Completions) => "completions",
        Some(Endpoint::Chat) => "chat",
        None => "*",
    }
}

/// The checks on the expectations of a replay or gateway run.
pub fn check_expectations(text: &str) {
    let lines = entry_lines(text);
    match Expectations::parse(text) {
        Ok(e) => {
            assert_eq!(e.entries.len(), lines.len(), "not one entry per line");
            for ((name, reason), (_, line)) in e.entries.iter().zip(&lines) {
                assert!(!name.is_empty() && !name.contains(char::is_whitespace), "entry named {name:?}");
                assert!(line.starts_with(name.as_str()), "entry {name:?} from line {line:?}");
                assert!(!reason.is_empty() && reason.trim() == reason, "entry {name:?} with reason {reason:?}");
            }
            let written: String = e.entries.iter().map(|(n, r)| format!("{n} {r}\n")).collect();
            let back = Expectations::parse(&written).expect("written back, the entries parse");
            assert_eq!(back.entries, e.entries, "written back, the entries differ");
        }
        Err(ReportError::NoReason { line, name }) => {
            let at = lines.iter().find(|(n, _)| *n == line).expect("the refused line holds an entry");
            assert!(at.1.starts_with(name.as_str()), "line {line} refused for {name:?}: {:?}", at.1);
        }
        Err(e) => panic!("an expectations file refused as {e}"),
    }
}

/// The checks on the known findings of a differential run.
pub fn check_differential(text: &str) {
    let lines = entry_lines(text);
    match DiffExpectations::parse(text) {
        Ok(DiffExpectations(known)) => {
            assert_eq!(known.len(), lines.len(), "not one entry per line");
            for (i, (k, (n, line))) in known.iter().zip(&lines).enumerate() {
                assert_eq!(k.line, *n, "entry {i} names line {} but came from line {n}", k.line);
                assert!(!k.field.is_empty() && !k.field.contains(' '), "field {:?}", k.field);
                assert!(line.starts_with(k.field.as_str()), "field {:?} from line {line:?}", k.field);
                assert!(!k.reason.is_empty() && k.reason.trim() == k.reason, "reason {:?}", k.reason);
                let twice = known[..i].iter().any(|o| o.field == k.field && o.endpoint == k.endpoint);
                assert!(!twice, "{} {} listed twice", k.field, endpoint_name(k.endpoint));
            }
            let written: String =
                known.iter().map(|k| format!("{} {} {}\n", k.field, endpoint_name(k.endpoint), k.reason)).collect();
            let DiffExpectations(back) = DiffExpectations::parse(&written).expect("written back, the entries parse");
            let strip = |ks: &[Known]| -> Vec<(String, Option<Endpoint>, String)> {
                ks.iter().map(|k| (k.field.clone(), k.endpoint, k.reason.clone())).collect()
            };
            assert_eq!(strip(&back), strip(&known), "written back, the entries differ");
        }
        Err(e) => {
            assert!(lines.iter().any(|(n, _)| *n == e.line), "refused at line {}, which holds no entry: {e}", e.line);
        }
    }
}

/// Every check of this target on one input.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    check_expectations(text);
    check_differential(text);
}
