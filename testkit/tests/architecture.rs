//! Drawing the workspace: every crate of it (the members of the root
//! `Cargo.toml` and the cargo-fuzz crates it excludes) has top-level
//! modules that use each other without a cycle, and the crates of the
//! workspace depend on each other floor by floor, in the order
//! docs/runner/README.md "Code layout" gives (engine-protocol at the
//! bottom, the `gpu-runner` command line at the top).
//!
//! A crate added to the workspace is checked without a line here; one that
//! is not in [`FLOORS`] fails until its floor is written down.

use std::path::{Path, PathBuf};

use engine_testkit::house::acyclic_crate;

/// The crates of the workspace, bottom floor first: a crate may depend
/// only on crates below it.
const FLOORS: &[&str] = &[
    "engine-protocol",
    "engine-testkit",
    "conformance",
    "engine-client",
    "process-sandbox",
    "mock-engine",
    "scenario-checks",
    "engine-replay",
    "gateway-scoring",
    "report-site",
    "gpu-runner",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The quoted strings of the root manifest's `key = [ ... ]` list.
fn list(manifest: &str, key: &str) -> Vec<String> {
    let start = manifest.find(&format!("\n{key} = [")).unwrap_or_else(|| panic!("no {key} list"));
    let rest = &manifest[start..];
    let body = &rest[rest.find('[').unwrap() + 1..rest.find(']').unwrap()];
    body.split(',').map(|s| s.trim().trim_matches('"').to_string()).filter(|s| !s.is_empty()).collect()
}

/// Every crate directory of the workspace: members and excluded fuzz crates.
fn crate_dirs() -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut dirs: Vec<PathBuf> = list(&manifest, "members").iter().map(|m| root().join(m)).collect();
    dirs.extend(list(&manifest, "exclude").iter().map(|m| root().join(m)));
    assert!(dirs.len() >= 10, "{dirs:?}");
    dirs
}

/// A manifest's `name = "..."` of `[package]`.
fn package_name(manifest: &str) -> String {
    let line = manifest.lines().find(|l| l.starts_with("name = ")).expect("a package name");
    line["name = ".len()..].trim_matches('"').to_string()
}

/// The workspace crates a manifest's `[dependencies]` name
/// (`name.workspace = true`, `name = { workspace = true, .. }` or
/// `name = { path = .. }`).
fn our_dependencies(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let ours = line.contains("workspace = true") || line.contains("path = ");
        if in_deps && ours {
            let name = line.split(['=', '.']).next().unwrap().trim();
            if FLOORS.contains(&name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

#[test]
fn no_crate_of_the_workspace_has_a_cycle_between_its_modules() {
    for dir in crate_dirs() {
        acyclic_crate(&dir.to_string_lossy());
    }
}

#[test]
fn every_crate_depends_only_on_the_crates_below_its_floor() {
    for dir in crate_dirs() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = package_name(&manifest);
        if name.ends_with("-fuzz") {
            continue;
        }
        let floor = FLOORS.iter().position(|f| *f == name).unwrap_or_else(|| panic!("{name} has no floor in FLOORS"));
        for dep in our_dependencies(&manifest) {
            let at = FLOORS.iter().position(|f| *f == dep).unwrap();
            assert!(at < floor, "{name} depends on {dep}, which is not below it");
        }
    }
}

#[test]
fn the_floor_check_sees_a_crate_that_depends_upward() {
    let manifest = "[package]\nname = \"engine-client\"\n\n[dependencies]\nengine-replay.workspace = true\n";
    assert_eq!(our_dependencies(manifest), ["engine-replay"]);
    let floor = FLOORS.iter().position(|f| *f == "engine-client").unwrap();
    assert!(FLOORS.iter().position(|f| *f == "engine-replay").unwrap() > floor);
}
