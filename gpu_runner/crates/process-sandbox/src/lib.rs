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
