//! Why a site could not be built; each error names the file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SiteError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not the report its name says: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{}: {why}", path.display())]
    Report { path: PathBuf, why: String },
    #[error("{}: no gateway report (gpu-runner gateway --report-json) to build the site from", dir.display())]
    NoGatewayReports { dir: PathBuf },
}
