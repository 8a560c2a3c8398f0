//! One loader for a model directory (a Hugging Face checkout such as
//! `golden/tiny/`): the files a gateway reads beside the engine, and, with
//! feature `translate`, the gateway tokenizer built from them by
//! `engine_protocol::translate::GatewayTokenizer::from_files` (the one
//! parser of those files).
//!
//! Files (docs/translation.md): `tokenizer.json` (required), and when
//! present `tokenizer_config.json` (its `eos_token`), `config.json` (the
//! model's facts, such as `vocab_size`, `max_position_embeddings`) and
//! `generation_config.json` (its `eos_token_id`, an int or a list). A file
//! that is absent is `None`; a file that is there but cannot be read is an
//! error naming it.

use std::path::{Path, PathBuf};

/// The files of a model directory, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDir {
    /// Where they were read from (for error messages).
    pub dir: PathBuf,
    /// `tokenizer.json`.
    pub tokenizer_json: Vec<u8>,
    /// `tokenizer_config.json`, if present.
    pub tokenizer_config_json: Option<String>,
    /// `config.json`, if present.
    pub config_json: Option<String>,
    /// `generation_config.json`, if present.
    pub generation_config_json: Option<String>,
}

/// Why a model directory could not be loaded; names the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum ModelDirError {
    /// A file could not be read (`tokenizer.json` missing, or a file there
    /// but unreadable).
    Read {
        /// The file.
        file: PathBuf,
        /// What reading it said.
        error: std::io::Error,
    },
    /// `tokenizer.json` is not a tokenizer this crate's tokenizer reads.
    #[cfg(feature = "translate")]
    Tokenizer {
        /// The model directory.
        dir: PathBuf,
        /// What the parser said (it names the file).
        error: engine_protocol::translate::tokenizer::TokenizerError,
    },
}

impl std::fmt::Display for ModelDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelDirError::Read { file, error } => write!(f, "{}: {error}", file.display()),
            #[cfg(feature = "translate")]
            ModelDirError::Tokenizer { dir, error } => write!(f, "{}/{error}", dir.display()),
        }
    }
}

impl std::error::Error for ModelDirError {}

impl ModelDir {
    /// The committed tiny model's files (`golden/tiny/`), compiled in: for
    /// binaries that run without a checkout (the fuzz targets of `fuzz/`
    /// and `gpu_runner/fuzz/`), parsed by the same code as a directory
    /// read from disk.
    pub fn tiny_embedded() -> ModelDir {
        ModelDir {
            dir: "golden/tiny".into(),
            tokenizer_json: include_bytes!("../../golden/tiny/tokenizer.json").to_vec(),
            tokenizer_config_json: Some(include_str!("../../golden/tiny/tokenizer_config.json").into()),
            config_json: Some(include_str!("../../golden/tiny/config.json").into()),
            generation_config_json: Some(include_str!("../../golden/tiny/generation_config.json").into()),
        }
    }

    /// Reads the files of `dir`.
    pub fn read(dir: &Path) -> Result<ModelDir, ModelDirError> {
        let required = |name: &str| {
            let file = dir.join(name);
            std::fs::read(&file).map_err(|error| ModelDirError::Read { file, error })
        };
        let optional = |name: &str| {
            let file = dir.join(name);
            match std::fs::read_to_string(&file) {
                Ok(s) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(ModelDirError::Read { file, error }),
            }
        };
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            tokenizer_json: required("tokenizer.json")?,
            tokenizer_config_json: optional("tokenizer_config.json")?,
            config_json: optional("config.json")?,
            generation_config_json: optional("generation_config.json")?,
        })
    }

    /// The committed tiny model (`golden/tiny/`).
    pub fn tiny() -> Result<ModelDir, ModelDirError> {
        ModelDir::read(&crate::corpus::golden_dir().join("tiny"))
    }

    /// The files as the tokenizer's parser takes them.
    #[cfg(feature = "translate")]
    pub fn files(&self) -> engine_protocol::translate::tokenizer::ModelFiles<'_> {
        engine_protocol::translate::tokenizer::ModelFiles {
            tokenizer_json: &self.tokenizer_json,
            tokenizer_config_json: self.tokenizer_config_json.as_deref(),
            generation_config_json: self.generation_config_json.as_deref(),
        }
    }

    /// The gateway tokenizer of this directory, with its EOS facts.
    #[cfg(feature = "translate")]
    pub fn tokenizer(&self) -> Result<engine_protocol::translate::GatewayTokenizer, ModelDirError> {
        engine_protocol::translate::GatewayTokenizer::from_files(&self.files())
            .map_err(|error| ModelDirError::Tokenizer { dir: self.dir.clone(), error })
    }
}

/// The gateway tokenizer of the model directory `dir`: [`ModelDir::read`],
/// then [`ModelDir::tokenizer`].
#[cfg(feature = "translate")]
pub fn tokenizer(dir: &Path) -> Result<engine_protocol::translate::GatewayTokenizer, ModelDirError> {
    ModelDir::read(dir)?.tokenizer()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_tiny_model_is_the_directory_on_disk() {
        let disk = ModelDir::tiny().expect("golden/tiny");
        assert_eq!(ModelDir { dir: disk.dir.clone(), ..ModelDir::tiny_embedded() }, disk);
    }

    #[test]
    fn the_tiny_model_directory_has_every_file() {
        let m = ModelDir::tiny().expect("golden/tiny");
        assert!(!m.tokenizer_json.is_empty());
        assert!(m.tokenizer_config_json.is_some());
        assert!(m.config_json.is_some());
        assert!(m.generation_config_json.is_some());
    }

    #[test]
    fn a_directory_without_tokenizer_json_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("testkit-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = ModelDir::read(&dir).expect_err("no tokenizer.json");
        match &e {
            ModelDirError::Read { file, .. } => assert_eq!(file, &dir.join("tokenizer.json")),
            #[allow(unreachable_patterns, reason = "the error enum is non_exhaustive")]
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("tokenizer.json"), "{e}");
        // Only tokenizer.json is required.
        std::fs::write(dir.join("tokenizer.json"), b"{}").unwrap();
        let m = ModelDir::read(&dir).expect("the optional files may be absent");
        assert_eq!((m.tokenizer_config_json, m.config_json, m.generation_config_json), (None, None, None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(feature = "translate")]
    #[test]
    fn a_tokenizer_json_that_is_not_a_tokenizer_is_an_error_naming_it() {
        let m = ModelDir {
            dir: "somewhere".into(),
            tokenizer_json: b"{}".to_vec(),
            tokenizer_config_json: None,
            config_json: None,
            generation_config_json: None,
        };
        let e = m.tokenizer().expect_err("not a tokenizer");
        assert!(e.to_string().starts_with("somewhere/tokenizer.json: "), "{e}");
        assert!(ModelDir::tiny().unwrap().tokenizer().is_ok());
    }
}
