//! The gateway's tokenizer: a `tokenizer.json` (Hugging Face `tokenizers`)
//! plus the EOS facts of the model directory, and an incremental decoder
//! with the state machine of `tokenizers`' `DecodeStream` primed with the
//! prompt (what vLLM's fast incremental detokenizer uses).
//!
//! Pure like the rest of the crate: the caller reads the model directory's
//! files ([`ModelFiles`]); `engine_testkit::model::ModelDir` does that for
//! a directory.
#![warn(missing_docs)]

use std::collections::HashMap;

use tokenizers::Tokenizer;

use super::generation::GenerationDefaults;

/// Why a gateway tokenizer could not be built: the model-directory file at
/// fault and what `tokenizers` said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenizerError {
    /// The file (`tokenizer.json`).
    pub file: &'static str,
    /// What was wrong with it.
    pub detail: String,
}

impl std::fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.detail)
    }
}

impl std::error::Error for TokenizerError {}

/// For callers that report errors as text.
impl From<TokenizerError> for String {
    fn from(e: TokenizerError) -> String {
        e.to_string()
    }
}

/// A tokenizer and the EOS ids a frontend derives from a model directory.
pub struct GatewayTokenizer {
    inner: Tokenizer,
    /// `tokenizer.eos_token_id` (from `tokenizer_config.json`'s `eos_token`).
    pub eos_token_id: Option<u32>,
    /// `generation_config.json`'s `eos_token_id` (int or list), in file order.
    pub generation_eos_token_ids: Vec<u32>,
    /// Added tokens (id -> content), special or not.
    pub added_tokens: HashMap<u32, String>,
    /// Ids of the added tokens marked special.
    pub special_ids: Vec<u32>,
    /// The default sampling parameters of `generation_config.json`.
    pub generation_defaults: GenerationDefaults,
}

impl std::fmt::Debug for GatewayTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("eos_token_id", &self.eos_token_id)
            .field("generation_eos_token_ids", &self.generation_eos_token_ids)
            .finish()
    }
}

fn ids_of(v: Option<&serde_json::Value>) -> Vec<u32> {
    match v {
        Some(serde_json::Value::Number(n)) => n.as_u64().and_then(|x| u32::try_from(x).ok()).into_iter().collect(),
        Some(serde_json::Value::Array(xs)) => {
            xs.iter().filter_map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok())).collect()
        }
        _ => Vec::new(),
    }
}

/// The files of a model directory a gateway's tokenizer is built from,
/// already read by the caller.
#[derive(Debug, Clone, Copy)]
pub struct ModelFiles<'a> {
    /// `tokenizer.json`.
    pub tokenizer_json: &'a [u8],
    /// `tokenizer_config.json`, if the directory has one (its `eos_token`).
    pub tokenizer_config_json: Option<&'a str>,
    /// `generation_config.json`, if the directory has one (its
    /// `eos_token_id`, an int or a list, and its default sampling
    /// parameters).
    pub generation_config_json: Option<&'a str>,
}

impl GatewayTokenizer {
    /// The model's EOS facts for the typed builder
    /// ([`crate::typed::EngineCoreRequest::builder`]): the tokenizer's EOS
    /// id, `generation_config.json`'s extra ids, ignored when `ignore_eos`.
    pub fn eos(&self, ignore_eos: bool) -> crate::typed::Eos {
        use crate::typed::Eos;
        let eos = match self.eos_token_id {
            Some(id) => Eos::token(i64::from(id)),
            None => Eos::none(),
        }
        .with_generation_ids(self.generation_eos_token_ids.iter().map(|&x| i64::from(x)));
        if ignore_eos {
            eos.ignored()
        } else {
            eos
        }
    }

    /// Builds the tokenizer and its EOS facts from a model directory's files.
    /// Missing (or unparsable) config files give fewer ids, as in vLLM.
    pub fn from_files(files: &ModelFiles<'_>) -> Result<Self, TokenizerError> {
        let inner = Tokenizer::from_bytes(files.tokenizer_json)
            .map_err(|e| TokenizerError { file: "tokenizer.json", detail: e.to_string() })?;
        let mut t = Self::from_tokenizer(inner);
        let parse = |s: Option<&str>| s.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok());
        if let Some(cfg) = parse(files.tokenizer_config_json) {
            let eos = match cfg.get("eos_token") {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(serde_json::Value::Object(m)) => m.get("content").and_then(|c| c.as_str()).map(str::to_string),
                _ => None,
            };
            t.eos_token_id = eos.and_then(|s| t.inner.token_to_id(&s));
        }
        if let Some(gen) = parse(files.generation_config_json) {
            t.generation_eos_token_ids = ids_of(gen.get("eos_token_id"));
            t.generation_defaults = GenerationDefaults::from_json(&gen);
        }
        Ok(t)
    }

    /// A tokenizer without model-directory facts (no EOS).
    pub fn from_tokenizer(inner: Tokenizer) -> Self {
        let mut added_tokens = HashMap::new();
        let mut special_ids = Vec::new();
        for (id, tok) in inner.get_added_tokens_decoder() {
            added_tokens.insert(id, tok.content.clone());
            if tok.special {
                special_ids.push(id);
            }
        }
        special_ids.sort_unstable();
        GatewayTokenizer {
            inner,
            eos_token_id: None,
            generation_eos_token_ids: Vec::new(),
            added_tokens,
            special_ids,
            generation_defaults: GenerationDefaults::default(),
        }
    }

    /// The vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The `tokenizers` tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// `encode(text, add_special_tokens=False)`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.inner.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
    }

    /// `decode(ids)`; an id outside the vocabulary decodes to nothing.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        self.inner.decode(ids, skip_special_tokens).unwrap_or_default()
    }

    /// Whether `id` is an added token marked special.
    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.binary_search(&id).is_ok()
    }
}

/// Incremental decoding with `tokenizers`' `DecodeStream` state machine,
/// primed with the prompt ids (vLLM's `DecodeStream(ids=prompt, ...)`).
/// `step` returns the new text, or `None` while the text ends inside an
/// unfinished UTF-8 sequence (the decoded tail is U+FFFD).
#[derive(Debug, Clone)]
pub struct DecodeStream {
    skip_special_tokens: bool,
    ids: Vec<u32>,
    prefix: String,
    prefix_index: usize,
}

/// Why [`DecodeStream::step`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeStreamError {
    /// The decoded text no longer starts with the stream's prefix
    /// (`tokenizers`' `DecodeStreamError::InvalidPrefix`): vLLM recovers by
    /// restarting the stream without the prompt.
    InvalidPrefix {
        /// The token that was being decoded.
        token_id: u32,
    },
    /// Any other decoding failure, as `tokenizers` reports it.
    Decode(String),
}

impl std::fmt::Display for DecodeStreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeStreamError::InvalidPrefix { token_id } => {
                write!(f, "invalid prefix encountered while decoding token {token_id}")
            }
            DecodeStreamError::Decode(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for DecodeStreamError {}

impl DecodeStream {
    /// A stream primed with `prompt`.
    pub fn new(prompt: &[u32], skip_special_tokens: bool) -> Self {
        DecodeStream { skip_special_tokens, ids: prompt.to_vec(), prefix: String::new(), prefix_index: 0 }
    }

    /// One token: the new text, `None` while inside an unfinished UTF-8
    /// sequence.
    pub fn step(&mut self, tok: &GatewayTokenizer, id: u32) -> Result<Option<String>, DecodeStreamError> {
        tokenizers::tokenizer::step_decode_stream(
            tok.inner(),
            vec![id],
            self.skip_special_tokens,
            &mut self.ids,
            &mut self.prefix,
            &mut self.prefix_index,
        )
        .map_err(|e| match e.downcast_ref::<tokenizers::tokenizer::DecodeStreamError>() {
            Some(tokenizers::tokenizer::DecodeStreamError::InvalidPrefix { .. }) => {
                DecodeStreamError::InvalidPrefix { token_id: id }
            }
            _ => DecodeStreamError::Decode(e.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokenizer_json_that_does_not_parse_is_an_error_naming_the_file_and_what_tokenizers_said() {
        let files =
            ModelFiles { tokenizer_json: b"{not json", tokenizer_config_json: None, generation_config_json: None };
        let e = GatewayTokenizer::from_files(&files).unwrap_err();
        assert_eq!(e.file, "tokenizer.json");
        assert!(!e.detail.is_empty());
        let text = e.to_string();
        assert_eq!(text, format!("tokenizer.json: {}", e.detail));
        assert_eq!(String::from(e), text, "the text a caller that reports errors as text gets");
    }

    const TINY: &[u8] = include_bytes!("../../../golden/tiny/tokenizer.json");

    fn with_tokenizer_config(json: &str) -> GatewayTokenizer {
        let files =
            ModelFiles { tokenizer_json: TINY, tokenizer_config_json: Some(json), generation_config_json: None };
        GatewayTokenizer::from_files(&files).unwrap()
    }

    #[test]
    fn the_eos_token_is_read_as_a_string_or_as_an_added_tokens_content() {
        assert_eq!(with_tokenizer_config(r#"{"eos_token": "</s>"}"#).eos_token_id, Some(2));
        assert_eq!(
            with_tokenizer_config(r#"{"eos_token": {"content": "</s>", "special": true}}"#).eos_token_id,
            Some(2)
        );
        assert_eq!(with_tokenizer_config(r#"{"eos_token": 2}"#).eos_token_id, None);
    }

    #[test]
    fn only_the_added_tokens_marked_special_are_special() {
        let t = with_tokenizer_config("{}");
        assert!(t.is_special(2), "</s>");
        let plain = t.encode("hello")[0];
        assert!(!t.is_special(plain), "{plain}");
    }

    #[test]
    fn a_decode_stream_whose_text_no_longer_starts_with_its_prefix_says_so_by_token() {
        let t = with_tokenizer_config("{}");
        let ids = t.encode("hello there");
        let mut s =
            DecodeStream { skip_special_tokens: false, ids: ids.clone(), prefix: "zzzz".into(), prefix_index: 0 };
        let e = s.step(&t, ids[0]).unwrap_err();
        assert_eq!(e, DecodeStreamError::InvalidPrefix { token_id: ids[0] });
        assert_eq!(e.to_string(), format!("invalid prefix encountered while decoding token {}", ids[0]));
        assert_eq!(DecodeStreamError::Decode("bad id".into()).to_string(), "bad id");
    }

    fn with_generation_config(json: &str) -> GatewayTokenizer {
        let files =
            ModelFiles { tokenizer_json: TINY, tokenizer_config_json: None, generation_config_json: Some(json) };
        GatewayTokenizer::from_files(&files).unwrap()
    }

    #[test]
    fn a_generation_configs_eos_token_id_is_read_as_one_int_or_a_list() {
        assert_eq!(with_generation_config(r#"{"eos_token_id": 7}"#).generation_eos_token_ids, vec![7]);
        assert_eq!(with_generation_config(r#"{"eos_token_id": [7, 9]}"#).generation_eos_token_ids, vec![7, 9]);
        assert!(with_generation_config(r#"{"eos_token_id": "7"}"#).generation_eos_token_ids.is_empty());
    }

    #[test]
    fn a_tokenizer_debugs_as_its_vocabulary_size_and_eos_facts() {
        let t = with_generation_config(r#"{"eos_token_id": 7}"#);
        let d = format!("{t:?}");
        assert!(d.starts_with("GatewayTokenizer {"), "{d}");
        assert!(
            d.contains(&format!("vocab_size: {}", t.vocab_size())) && d.contains("generation_eos_token_ids: [7]"),
            "{d}"
        );
    }
}
