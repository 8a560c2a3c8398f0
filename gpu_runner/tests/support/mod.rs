//! What the transport tests against the mock engine share
//! (`transport_mock.rs`, `fault_wire.rs`): the release they speak, their
//! deadlines, and the one wrapper no test runs past.

#![allow(dead_code, reason = "each test binary uses what it needs")]

use std::future::Future;
use std::time::Duration;

use engine_protocol::ReleaseSchema;

/// No test runs longer.
pub const TEST_DEADLINE: Duration = Duration::from_secs(30);
/// For an engine to register.
pub const READY: Duration = Duration::from_secs(10);
/// For a request to finish.
pub const FINISH: Duration = Duration::from_secs(10);

/// vLLM 0.32.0's tables.
pub fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

/// Runs `f` under the test deadline: no test can hang.
pub async fn within<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_DEADLINE, f).await.expect("test ran past its deadline");
}
