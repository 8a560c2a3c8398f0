//! One loader for every kind of scenario file (docs/runner.md: vLLM and
//! TokenSpeed replay `golden/replay/**.json`, gateway
//! `golden/gateway/*.json`, end to end `golden/gateway/e2e/*.json`): every
//! `*.json` of a directory, in file-name order, each parsed by its model
//! ([`ScenarioFile`]); a file that cannot be read or parsed is a
//! [`LoadError`] naming the file.

use std::path::{Path, PathBuf};

use crate::check::CheckError;

/// Why a scenario file's content was refused. `Display` keeps the words
/// the runner has always used (the scenario's name first).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// Not JSON.
    #[error("{name}: {source}")]
    Json {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// A check entry was refused; `at` names it (`<scenario>: checks[2]`).
    #[error("{at}: {error}")]
    Check {
        at: String,
        #[source]
        error: CheckError,
    },
    /// A mock engine script in the file does not read.
    #[error(transparent)]
    Script(#[from] crate::mock::ScriptError),
    /// Anything else about the file's shape, in words (`<scenario>:
    /// requests[0].id missing`).
    #[error("{0}")]
    Invalid(String),
}

impl ScenarioError {
    /// The refused check, when a check was refused.
    pub fn check_error(&self) -> Option<&CheckError> {
        match self {
            ScenarioError::Check { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<String> for ScenarioError {
    fn from(s: String) -> ScenarioError {
        ScenarioError::Invalid(s)
    }
}

impl From<&str> for ScenarioError {
    fn from(s: &str) -> ScenarioError {
        ScenarioError::Invalid(s.to_string())
    }
}

/// Why a scenario directory did not load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The directory cannot be listed.
    #[error("{}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be read.
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file's content was refused.
    #[error("{}: {error}", file.display())]
    Scenario {
        file: PathBuf,
        #[source]
        error: ScenarioError,
    },
    /// Two files give the same scenario name (for kinds whose names must
    /// be unique).
    #[error("{}: two scenarios named {name}", dir.display())]
    DuplicateName { dir: PathBuf, name: String },
}

impl LoadError {
    /// The file the error is about, if it is about one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            LoadError::Read { file, .. } | LoadError::Scenario { file, .. } => Some(file),
            _ => None,
        }
    }

    /// The refused check, when a check was refused.
    pub fn check_error(&self) -> Option<&CheckError> {
        match self {
            LoadError::Scenario { error, .. } => error.check_error(),
            _ => None,
        }
    }
}

/// A scenario model that a file holds; `C` is what parsing needs besides
/// the text (the golden tree and the tokenizer for gateway scenarios,
/// nothing for the others).
pub trait ScenarioFile<C: ?Sized = ()>: Sized {
    /// Whether two files of a directory may not give the same name.
    const UNIQUE_NAMES: bool = false;
    /// Parses a file's text; `stem` (the file name without `.json`) names
    /// the scenario where the file gives no name.
    fn parse(stem: &str, text: &str, ctx: &C) -> Result<Self, ScenarioError>;
    /// The scenario's name.
    fn name(&self) -> &str;
}

/// Every `*.json` of `dir` as a scenario of model `S`, in file-name order.
pub fn load_dir<S: ScenarioFile<C>, C: ?Sized>(dir: &Path, ctx: &C) -> Result<Vec<S>, LoadError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| LoadError::Dir { dir: dir.to_path_buf(), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out: Vec<S> = Vec::new();
    for file in files {
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(&file).map_err(|source| LoadError::Read { file: file.clone(), source })?;
        let s = S::parse(&stem, &text, ctx).map_err(|error| LoadError::Scenario { file: file.clone(), error })?;
        if S::UNIQUE_NAMES && out.iter().any(|o| o.name() == s.name()) {
            return Err(LoadError::DuplicateName { dir: dir.to_path_buf(), name: s.name().to_string() });
        }
        out.push(s);
    }
    Ok(out)
}
