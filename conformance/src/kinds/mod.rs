//! Checkers for the gateway kinds (`stop_detection`, `logprob_shaping`,
//! `translation`, `tokenspeed_translation`): each runs
//! `engine_protocol::translate` on the case's `input` and compares with
//! `expected` (computed by vLLM's, or TokenSpeed's, own frontend).
//! Shapes are documented in golden/README.md ("Frontend kinds").

mod error;
pub mod logprobs;
pub mod stop;
pub mod tokenspeed_translation;
pub mod translation;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use engine_protocol::translate::GatewayTokenizer;
use serde_json::Value as Json;

use engine_testkit::corpus::Case;
use engine_testkit::model::ModelDirError;
use engine_testkit::outcome::Verdict;

pub use error::KindError;

/// The gateway kinds this build checks.
pub const KNOWN: &[&str] = &["stop_detection", "logprob_shaping", "translation", "tokenspeed_translation"];

/// Checks a case of a gateway kind.
pub fn check(case: &Case, input: &Json, expected: &Json) -> Verdict {
    let r = match case.kind.as_str() {
        "stop_detection" => stop::check(case, input, expected),
        "logprob_shaping" => logprobs::check(case, input, expected),
        "translation" => translation::check(case, input, expected),
        // The TokenSpeed translation layer writes 0.1.1's request
        // (docs/tokenspeed-wire.md §11.4): a case of another TokenSpeed
        // version is not something it claims to do.
        "tokenspeed_translation" if case.version != tokenspeed_translation::TARGET_VERSION => {
            return Verdict::Skip(format!(
                "the TokenSpeed translation layer targets tokenspeed {}, not {}",
                tokenspeed_translation::TARGET_VERSION,
                case.version
            ))
        }
        "tokenspeed_translation" => tokenspeed_translation::check(case, input, expected),
        other => return Verdict::Skip(format!("kind `{other}` is not implemented by this build")),
    };
    match r {
        Ok(()) => Verdict::Pass,
        Err(e) => Verdict::Fail(e.to_string()),
    }
}

type Cache = Mutex<HashMap<PathBuf, Arc<GatewayTokenizer>>>;

/// The tokenizer a case names (`"tokenizer": "tiny"`): the directory of
/// that name found beside the case file or any of its ancestors (so
/// `golden/tiny/` for `golden/vllm/<v>/<group>/<case>.json`).
pub fn tokenizer_for(case: &Case, input: &Json) -> Result<Arc<GatewayTokenizer>, KindError> {
    let name = input
        .get("tokenizer")
        .and_then(Json::as_str)
        .ok_or_else(|| KindError::invalid("input.tokenizer", "must name a tokenizer directory"))?;
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(KindError::TokenizerName { name: name.to_string() });
    }
    let file = std::fs::canonicalize(&case.file).unwrap_or_else(|_| case.file.clone());
    let dir = file
        .ancestors()
        .skip(1)
        .map(|a| a.join(name))
        .find(|d| d.join("tokenizer.json").is_file())
        .ok_or_else(|| KindError::TokenizerNotFound { name: name.to_string(), case_file: case.file.clone() })?;
    load(&dir)
}

fn load(dir: &Path) -> Result<Arc<GatewayTokenizer>, KindError> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(t) = cache.lock().map_err(|_| KindError::TokenizerCache)?.get(dir) {
        return Ok(t.clone());
    }
    let t = Arc::new(load_tokenizer(dir).map_err(|e| KindError::Tokenizer(Box::new(e)))?);
    cache.lock().map_err(|_| KindError::TokenizerCache)?.insert(dir.to_path_buf(), t.clone());
    Ok(t)
}

/// Reads a model directory (`tokenizer.json`, and `tokenizer_config.json`
/// and `generation_config.json` when present) into a gateway tokenizer:
/// the testkit's loader ([`engine_testkit::model::ModelDir`]).
pub fn load_tokenizer(dir: &Path) -> Result<GatewayTokenizer, ModelDirError> {
    engine_testkit::model::tokenizer(dir)
}

/// JSON number or non-finite string as f64 (docs/case-format.md §6.4).
pub fn num(v: &Json) -> Option<f64> {
    engine_protocol::view::float_of(v)
}

/// Floats equal as IEEE doubles, NaN equal to NaN.
pub fn same_f64(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// The token ids at `what`: an array of u32s.
pub fn ids(v: &Json, what: &str) -> Result<Vec<u32>, KindError> {
    v.as_array()
        .ok_or_else(|| KindError::invalid(what, "must be an array"))?
        .iter()
        .map(|x| {
            x.as_u64().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| KindError::NotA {
                path: what.to_string(),
                value: x.clone(),
                what: "a token id",
            })
        })
        .collect()
}
