//! `process-sandbox`: the processes the suite launches (engines, gateways)
//! and the files it reads from them, kept in bounds.
//!
//! - [`launcher`]: starting engines in their own process group and
//!   stopping them;
//! - [`listening`]: what a process tree listens on (loopback only);
//! - [`workdir`]: the run's private work directory (random name, mode
//!   0700, removed at exit);
//! - [`redact`]: credentials out of the command lines and log text the
//!   suite writes;
//! - [`untrusted`]: limits on the files the suite reads and on the names
//!   that become file names.
//!
//! Nothing here knows a dialect or a scenario: it is the floor the mock,
//! the replay runner and gateway scoring stand on.

pub mod launcher;
pub mod listening;
pub mod redact;
pub mod untrusted;
pub mod workdir;

/// Drawing the house of `process-sandbox`: its modules (launcher,
/// listening sockets, work directory, redaction, untrusted files) use each
/// other without a cycle; only the launcher uses another (redaction, for
/// the command lines it logs).
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn only_the_launcher_uses_another_module_of_the_sandbox() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        for (module, uses) in &g.edges {
            if module != "launcher" {
                assert!(uses.is_empty(), "{module} uses {uses:?}");
            }
        }
    }
}
