//! One loader for every kind of scenario file (docs/runner/scenarios.md,
//! tokenspeed.md, gateway.md: vLLM and TokenSpeed replay
//! `golden/replay/**.json`, gateway `golden/gateway/*.json`, end to end
//! `golden/gateway/e2e/*.json`): every `*.json` of a directory, in
//! file-name order, each parsed by its model ([`ScenarioFile`]); a file
//! that cannot be read or parsed is a [`LoadError`] naming the file. Files
//! are untrusted data ([`process_sandbox::untrusted`]): read up to a size limit,
//! refused when nested too deep, and a scenario's name must be a plain file
//! name.

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
    /// A file the scenario names was refused (`at` names the entry and the
    /// file: `requests[0]: from_golden "vllm/0.32.0/stop/eos_hidden"`): a
    /// name that is not a path inside the tree it names files in, a file
    /// too large or nested too deep ([`process_sandbox::untrusted`]).
    #[error("{at}: {error}")]
    Refused {
        at: String,
        #[source]
        error: process_sandbox::untrusted::Refused,
    },
    /// A mock engine script in the file does not read.
    #[error(transparent)]
    Script(#[from] mock_engine::ScriptError),
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
    /// A file or the name it gives was refused before or after parsing: too
    /// large, nested too deep, a name that cannot be a file name
    /// ([`process_sandbox::untrusted`]).
    #[error("{}: {error}", file.display())]
    Refused {
        file: PathBuf,
        #[source]
        error: process_sandbox::untrusted::Refused,
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
            LoadError::Read { file, .. } | LoadError::Scenario { file, .. } | LoadError::Refused { file, .. } => {
                Some(file)
            }
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
        let text = match process_sandbox::untrusted::read_text(&file, process_sandbox::untrusted::MAX_INPUT_FILE_BYTES)
        {
            Ok(t) => t,
            Err(process_sandbox::untrusted::Refused::Io { source, .. }) => {
                return Err(LoadError::Read { file: file.clone(), source })
            }
            Err(error) => return Err(LoadError::Refused { file: file.clone(), error }),
        };
        let s = parse_file::<S, C>(&file, &text, ctx)?;
        if S::UNIQUE_NAMES && out.iter().any(|o| o.name() == s.name()) {
            return Err(LoadError::DuplicateName { dir: dir.to_path_buf(), name: s.name().to_string() });
        }
        out.push(s);
    }
    Ok(out)
}

/// One file's text as a scenario of model `S`: what [`load_dir`] does
/// with each file once it is read (the nesting limit, the model's parse,
/// the name as one path component), with no file system involved, so
/// that the fuzz target `scenario_file` (gpu_runner/fuzz) runs the
/// loader's own code. `file` names the file in errors and gives the stem
/// that names a scenario whose text names none.
pub fn parse_file<S: ScenarioFile<C>, C: ?Sized>(file: &Path, text: &str, ctx: &C) -> Result<S, LoadError> {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let refused = |error| LoadError::Refused { file: file.to_path_buf(), error };
    process_sandbox::untrusted::check_json_depth(text, process_sandbox::untrusted::MAX_JSON_DEPTH).map_err(refused)?;
    let s = S::parse(&stem, text, ctx).map_err(|error| LoadError::Scenario { file: file.to_path_buf(), error })?;
    // Names become directory names under --record.
    process_sandbox::untrusted::path_component(s.name()).map_err(refused)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario that is only its name (`{"name": ...}`, else the stem).
    struct Named(String);

    impl ScenarioFile for Named {
        fn parse(stem: &str, text: &str, _: &()) -> Result<Self, ScenarioError> {
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|source| ScenarioError::Json { name: stem.into(), source })?;
            Ok(Named(v.get("name").and_then(|n| n.as_str()).unwrap_or(stem).to_string()))
        }
        fn name(&self) -> &str {
            &self.0
        }
    }

    fn load_one(text: &[u8]) -> Result<Vec<Named>, LoadError> {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("s.json"), text).unwrap();
        load_dir::<Named, ()>(d.path(), &())
    }

    #[test]
    fn a_plain_scenario_file_loads() {
        assert_eq!(load_one(br#"{"name": "stop_strings"}"#).unwrap()[0].0, "stop_strings");
    }

    #[test]
    fn a_scenario_whose_name_climbs_out_of_the_record_directory_is_refused() {
        for name in ["../../etc/cron.d/x", "a/b", "..", "bell\u{7}"] {
            let text = serde_json::json!({ "name": name }).to_string();
            let e = load_one(text.as_bytes()).err().unwrap_or_else(|| panic!("{name:?} loaded"));
            assert!(
                matches!(&e, LoadError::Refused { error: process_sandbox::untrusted::Refused::Name { .. }, .. }),
                "{name:?}: {e}"
            );
            assert!(e.file().is_some_and(|f| f.ends_with("s.json")), "{e}");
        }
    }

    #[test]
    fn an_oversized_scenario_file_is_refused_with_its_limit() {
        let mut text = b"{\"name\": \"x\", \"pad\": \"".to_vec();
        text.resize(process_sandbox::untrusted::MAX_INPUT_FILE_BYTES as usize + 1, b'a');
        let e = load_one(&text).err().expect("refused");
        assert!(
            matches!(&e, LoadError::Refused { error: process_sandbox::untrusted::Refused::TooLarge { .. }, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("16777216 bytes"), "{e}");
    }

    #[test]
    fn a_deeply_nested_scenario_file_is_refused_before_parsing() {
        let text = format!("{{\"name\": \"x\", \"deep\": {}{}}}", "[".repeat(100), "]".repeat(100));
        let e = load_one(text.as_bytes()).err().expect("refused");
        assert!(
            matches!(
                &e,
                LoadError::Refused { error: process_sandbox::untrusted::Refused::TooDeep { limit: 64, .. }, .. }
            ),
            "{e}"
        );
    }
}
