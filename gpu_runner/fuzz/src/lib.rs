//! cargo-fuzz targets for the parsers of the suite's own formats that
//! peers write (fuzz/README.md "Targets", second crate): the testee
//! protocol of `conformance` (`testee_frames`), and the scenario and
//! expectations files of `gpu-runner` (`scenario_file`,
//! `expectations_file`). fuzz/ fuzzes the wire codec below both; this
//! crate sits above `gpu-runner`, as the dependency rule wants.
//!
//! Each target is one function, `<target>::check(bytes)`, that panics on
//! a broken invariant; the fuzz target calls it, and so does
//! `tests/seeds.rs` on every committed seed, on stable.

pub mod expectations_file;
pub mod scenario_file;
pub mod seeds;
pub mod testee_frames;

/// The targets, as named in Cargo.toml's `[[bin]]`s and under corpus/.
pub const TARGETS: [&str; 3] = ["testee_frames", "scenario_file", "expectations_file"];

/// Runs `target`'s checks on `data`; false for an unknown target.
pub fn fuzz(target: &str, data: &[u8]) -> bool {
    match target {
        "testee_frames" => testee_frames::check(data),
        "scenario_file" => scenario_file::check(data),
        "expectations_file" => expectations_file::check(data),
        _ => return false,
    }
    true
}
