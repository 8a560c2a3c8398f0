//! [`CliError`]: why a `gpu-runner` command could not run (exit code 2).
//! A scenario's failure is its verdict in the report, never an error here;
//! `Display` is what the runner prints after `gpu-runner: `.

use std::path::{Path, PathBuf};

/// Why a `gpu-runner` command (`run`, `mock-engine`, `gateway`,
/// `scoreboard`) could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The arguments do not make sense together.
    #[error("{0}")]
    Usage(String),
    /// A file given on the command line was refused (too large, not
    /// text): [`process_sandbox::untrusted`].
    #[error(transparent)]
    Refused(#[from] process_sandbox::untrusted::Refused),
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A report is not JSON.
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The report site could not be built (`gpu-runner report`).
    #[error(transparent)]
    Site(#[from] report_site::SiteError),
    /// A gateway report without `gateway`.
    #[error("{}: not a gateway report (no `gateway`)", path.display())]
    NotAGatewayReport { path: PathBuf },
    /// This build has no schema table for the release.
    #[error(transparent)]
    NoSchema(#[from] engine_protocol::UnknownRelease),
    /// The run's release (`--release`, or the venv's) has no table, or
    /// the venv's cannot be told.
    #[error(transparent)]
    Release(#[from] scenario_checks::release::ReleaseError),
    /// The model directory's tokenizer does not load.
    #[error(transparent)]
    Tokenizer(#[from] engine_protocol::translate::tokenizer::TokenizerError),
    /// A model directory that does not load (names the file).
    #[error("{0}")]
    Model(#[from] engine_testkit::model::ModelDirError),
    /// A scenario directory did not load.
    #[error(transparent)]
    Load(#[from] scenario_checks::load::LoadError),
    /// A mock engine script does not read.
    #[error(transparent)]
    Script(#[from] mock_engine::ScriptError),
    /// A recorded registration case does not read.
    #[error(transparent)]
    RegistrationCase(#[from] mock_engine::registration::RegistrationCaseError),
    /// The mock engine (`mock-engine`) stopped serving.
    #[error(transparent)]
    Mock(#[from] mock_engine::MockError),
    /// The engine or the tiny model could not be started.
    #[error(transparent)]
    Launch(#[from] process_sandbox::launcher::LaunchError),
    /// `--record` could not write.
    #[error(transparent)]
    Record(#[from] engine_replay::record::RecordError),
    /// The replay run stopped before its end.
    #[error(transparent)]
    RunAll(#[from] engine_replay::replay::runner::RunAllError),
    /// The TokenSpeed run could not run.
    #[error(transparent)]
    Tokenspeed(#[from] engine_replay::tokenspeed::RunError),
    /// The gateway could not be started or scored.
    #[error(transparent)]
    Gateway(#[from] gateway_scoring::gateway::GatewayError),
    /// A bad expectations file or shard.
    #[error(transparent)]
    Report(#[from] scenario_checks::report::ReportError),
    /// A bad codec report.
    #[error(transparent)]
    Codec(#[from] gateway_scoring::scoreboard::CodecReportError),
    /// A bad release sweep report.
    #[error(transparent)]
    Sweep(#[from] gateway_scoring::scoreboard::SweepReportError),
    /// The run was ended by a signal (`SIGINT`, `SIGTERM`).
    #[error("{what} ({signal})")]
    Signal { what: &'static str, signal: &'static str },
}

impl CliError {
    /// A file error at `path`.
    pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
        move |source| CliError::Io { path: path.to_path_buf(), source }
    }
}
