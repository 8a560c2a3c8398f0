//! Generated files checked against their source: a test computes what a
//! committed file must hold and calls [`check_or_bless`]; with
//! `ENGINE_PROTOCOL_BLESS` set it rewrites the file instead (the typed API,
//! the older releases' schema tables, docs/reports/compatibility.md).

use std::path::Path;

/// Fails when `path` does not hold `want` exactly, naming the first line
/// that differs (both versions of it) and `regenerate`, the command that
/// rewrites it; with `ENGINE_PROTOCOL_BLESS` set, writes `want` there.
pub fn check_or_bless(path: &Path, want: &str, regenerate: &str) {
    if std::env::var_os("ENGINE_PROTOCOL_BLESS").is_some() {
        std::fs::write(path, want).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| have.lines().count().min(want.lines().count()) + 1, |i| i + 1);
        panic!(
            "{} is stale (first difference at line {line}: committed {:?}, generated {:?}); regenerate it with {regenerate}",
            path.display(),
            have.lines().nth(line - 1).unwrap_or(""),
            want.lines().nth(line - 1).unwrap_or("")
        );
    }
}
