//! The model's default sampling parameters: what vLLM's OpenAI server takes
//! from the model's `generation_config.json` for a request that leaves a
//! parameter out (docs/translation.md, "Generation-config defaults").
//!
//! Wire-side facts (vLLM 0.32.0 and 0.33.0, `vllm/config/model.py`
//! `ModelConfig.get_diff_sampling_param`, `vllm/entrypoints/openai/completion/protocol.py`
//! `CompletionRequest.to_sampling_params`,
//! `vllm/entrypoints/serve/utils/api_utils.py` `get_max_tokens`):
//!
//! - with `--generation-config auto` (the default) the server reads the
//!   model's generation config (`transformers.GenerationConfig`, its
//!   `to_diff_dict()`: with transformers 5, which both releases install,
//!   every key the file sets) and keeps the keys `repetition_penalty`,
//!   `presence_penalty`, `frequency_penalty`, `temperature`, `top_k`,
//!   `top_p`, `min_p` and `max_new_tokens` (as `max_tokens`), plus, from
//!   0.33.0, `skip_special_tokens`; a key set to null is not kept;
//! - each sampling parameter a request leaves out (null) takes the model's
//!   default, then vLLM's neutral one (`1.0`, `0.0`, `1.0`, `1.0`, `0`,
//!   `0.0`);
//! - `max_tokens`: the request's, or else the model's default, capped by
//!   the room left in the context (`max_model_len - prompt length`).
//!
//! With `--generation-config vllm` none of this applies
//! ([`super::TranslateOptions::generation_config_defaults`]).

use super::request::GenerateRequest;
use crate::schema::ReleaseSchema;

/// The default sampling parameters a model's `generation_config.json`
/// sets (each `None` when the file does not set it, or sets it to null or
/// to a value of another JSON type).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct GenerationDefaults {
    /// `temperature`.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `top_k`.
    pub top_k: Option<i64>,
    /// `min_p`.
    pub min_p: Option<f64>,
    /// `repetition_penalty`.
    pub repetition_penalty: Option<f64>,
    /// `presence_penalty`.
    pub presence_penalty: Option<f64>,
    /// `frequency_penalty`.
    pub frequency_penalty: Option<f64>,
    /// `max_new_tokens` (vLLM's `max_tokens`).
    pub max_tokens: Option<i64>,
    /// `skip_special_tokens` (read from 0.33.0 on).
    pub skip_special_tokens: Option<bool>,
}

impl GenerationDefaults {
    /// The defaults of a parsed `generation_config.json`.
    pub fn from_json(v: &serde_json::Value) -> GenerationDefaults {
        let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let i = |k: &str| v.get(k).and_then(serde_json::Value::as_i64);
        GenerationDefaults {
            temperature: f("temperature"),
            top_p: f("top_p"),
            top_k: i("top_k"),
            min_p: f("min_p"),
            repetition_penalty: f("repetition_penalty"),
            presence_penalty: f("presence_penalty"),
            frequency_penalty: f("frequency_penalty"),
            max_tokens: i("max_new_tokens"),
            skip_special_tokens: v.get("skip_special_tokens").and_then(serde_json::Value::as_bool),
        }
    }

    /// Whether the file sets none of them.
    pub fn is_empty(&self) -> bool {
        *self == GenerationDefaults::default()
    }

    /// Step: `req` with each sampling parameter it leaves out taken from
    /// these defaults, as `release`'s server reads them (`max_tokens` is
    /// not filled: see [`super::request::resolve_max_tokens`], which caps
    /// the default by the room left).
    pub fn apply(&self, req: &GenerateRequest, release: &'static ReleaseSchema) -> GenerateRequest {
        let mut r = req.clone();
        r.temperature = r.temperature.or(self.temperature);
        r.top_p = r.top_p.or(self.top_p);
        r.top_k = r.top_k.or(self.top_k);
        r.min_p = r.min_p.or(self.min_p);
        r.repetition_penalty = r.repetition_penalty.or(self.repetition_penalty);
        r.presence_penalty = r.presence_penalty.or(self.presence_penalty);
        r.frequency_penalty = r.frequency_penalty.or(self.frequency_penalty);
        if reads_skip_special_tokens(release) {
            r.skip_special_tokens = r.skip_special_tokens.or(self.skip_special_tokens);
        }
        r
    }
}

/// Whether `release`'s server takes `skip_special_tokens` from the
/// generation config (0.33.0 added it to the keys it keeps).
fn reads_skip_special_tokens(release: &'static ReleaseSchema) -> bool {
    release.version != "0.32.0"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::VLLM_RELEASES;

    fn qwen_like() -> GenerationDefaults {
        GenerationDefaults::from_json(&serde_json::json!({
            "bos_token_id": 509, "do_sample": true, "eos_token_id": [511, 509],
            "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
            "max_new_tokens": 9, "skip_special_tokens": false, "min_p": null
        }))
    }

    #[test]
    fn the_sampling_keys_of_a_generation_config_are_read_and_nothing_else() {
        let d = qwen_like();
        assert_eq!(
            (d.temperature, d.top_p, d.top_k, d.repetition_penalty),
            (Some(0.7), Some(0.8), Some(20), Some(1.05))
        );
        assert_eq!((d.max_tokens, d.skip_special_tokens, d.min_p), (Some(9), Some(false), None));
        assert!(GenerationDefaults::from_json(&serde_json::json!({"eos_token_id": [2, 4]})).is_empty());
    }

    #[test]
    fn a_parameter_the_request_sets_wins_over_the_default() {
        let req = GenerateRequest { temperature: Some(0.0), ..Default::default() };
        let r = qwen_like().apply(&req, VLLM_RELEASES[1]);
        assert_eq!((r.temperature, r.top_p, r.top_k), (Some(0.0), Some(0.8), Some(20)));
        assert_eq!(r.max_tokens, None, "max_tokens is resolved against the room, not filled");
    }

    #[test]
    fn only_0_33_takes_skip_special_tokens_from_the_generation_config() {
        let req = GenerateRequest::default();
        assert_eq!(qwen_like().apply(&req, VLLM_RELEASES[0]).skip_special_tokens, None);
        assert_eq!(qwen_like().apply(&req, VLLM_RELEASES[1]).skip_special_tokens, Some(false));
    }
}
