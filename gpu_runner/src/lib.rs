//! `gpu-runner`: the gateway side of vLLM's engine-core protocol over real
//! ZeroMQ, a mock engine for hermetic tests, and the live-engine runner.
//!
//! Modules, one concern each:
//!
//! - [`handshake`]: HELLO / INIT / READY / registration as data, and the
//!   per-engine handshake state;
//! - [`transport`]: the gateway's sockets, request streams, output
//!   demultiplexing and failure detection;
//! - [`mock_engine`]: the engine side, scripted, with fault modes;
//! - [`scenario`]: scenarios as data, run through the translation layer,
//!   and their checks;
//! - [`report`]: verdicts, expectations, shards, text/JSON/JUnit;
//! - [`record`]: `--record`, every frame set of a run as a golden-shaped
//!   file without a verdict;
//! - [`launcher`]: starting engines in their own process group and
//!   stopping them;
//! - [`cli`]: `gpu-runner run` and `gpu-runner mock-engine`.
//!
//! The wire facts relied on are listed in docs/runner.md. All encoding and
//! decoding goes through `engine_protocol`.

pub mod cli;
pub mod handshake;
pub mod launcher;
pub mod mock_engine;
pub mod record;
pub mod report;
pub mod scenario;
pub mod transport;
