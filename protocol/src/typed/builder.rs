//! Building an `EngineCoreRequest` the engine serves:
//! [`EngineCoreRequest::builder`] takes what the engine requires and its
//! decoder does not check, so that a request that compiles is one a live
//! engine serves as meant.
//!
//! What the engine requires (docs/wire-protocol.md §10, §13.4; the live
//! captures of `golden/vllm/0.32.0/live/`, tests/serving_problems.rs):
//! a request id (the outputs name requests by it), a prompt (held as the
//! int32 array vLLM 0.34.0's frontend sends, [`TokenIds`], and written as
//! each release takes it), `max_tokens`
//! (nil decodes, then the engine asserts), the EOS facts (without
//! `_eos_token_id` the engine never stops on EOS), and a `_backend` for a
//! structured-output constraint (without it a 0.33 engine finishes the
//! request with ERROR).
//!
//! The EOS facts are what vLLM's frontend derives from the model
//! (`SamplingParams.update_from_generation_config` and
//! `update_from_tokenizer`, `vllm/sampling_params.py` in 0.32 and 0.33):
//! `_eos_token_id` is the tokenizer's EOS id unless `ignore_eos`;
//! `_all_stop_token_ids` holds it, the stop token ids and the extra EOS
//! ids of `generation_config.json`; those extra ids also join
//! `stop_token_ids` unless `ignore_eos`. [`Eos::stop_ids`] computes them;
//! the translation layer uses the same function.

use std::collections::BTreeSet;

use super::{
    Constraint, EngineCoreRequest, RequestOutputKind, SamplingParams, StopStrings, StructuredOutputsParams, TokenIds,
};
use crate::error::{Error, RejectClass};
use crate::validate::{first_violation, SAMPLING_PARAMS_RULES};

/// The model's end-of-sequence facts, from its tokenizer
/// (`eos_token_id`) and `generation_config.json` (`eos_token_id`, one id
/// or a list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eos {
    token_id: Option<i64>,
    generation_ids: Vec<i64>,
    ignore: bool,
}

impl Eos {
    /// The tokenizer's EOS token id: the request stops on it.
    pub fn token(id: i64) -> Eos {
        Eos { token_id: Some(id), generation_ids: Vec::new(), ignore: false }
    }

    /// A model whose tokenizer has no EOS token: the request runs to
    /// `max_tokens` or a stop ([`crate::ServingProblem::NoEosTokenId`]
    /// warns of it).
    pub fn none() -> Eos {
        Eos { token_id: None, generation_ids: Vec::new(), ignore: false }
    }

    /// The EOS ids `generation_config.json` lists besides the tokenizer's
    /// (chat models often have several): the request stops on those too.
    pub fn with_generation_ids(mut self, ids: impl IntoIterator<Item = i64>) -> Eos {
        self.generation_ids = ids.into_iter().collect();
        self
    }

    /// `ignore_eos`: generate past EOS, to `max_tokens` (benchmarks,
    /// fixed-length output).
    pub fn ignored(mut self) -> Eos {
        self.ignore = true;
        self
    }

    /// Whether EOS is ignored.
    pub fn is_ignored(&self) -> bool {
        self.ignore
    }

    /// The stop-id fields vLLM's frontend derives from these facts and a
    /// request's `stop_token_ids` (kept in order, first occurrences).
    ///
    /// ```
    /// use engine_protocol::typed::Eos;
    ///
    /// let ids = Eos::token(2).with_generation_ids([2, 32000]).stop_ids(&[13]);
    /// assert_eq!(ids.eos_token_id, Some(2));
    /// assert_eq!(ids.stop_token_ids, [13, 32000]);
    /// assert_eq!(ids.all_stop_token_ids.into_iter().collect::<Vec<_>>(), [2, 13, 32000]);
    /// ```
    pub fn stop_ids(&self, stop_token_ids: &[i64]) -> StopIds {
        let mut stops: Vec<i64> = Vec::with_capacity(stop_token_ids.len());
        for &t in stop_token_ids {
            if !stops.contains(&t) {
                stops.push(t);
            }
        }
        let mut all: BTreeSet<i64> = stops.iter().copied().collect();
        all.extend(self.token_id);
        let extra: BTreeSet<i64> = self.generation_ids.iter().copied().filter(|&x| Some(x) != self.token_id).collect();
        if !extra.is_empty() {
            all.extend(extra.iter().copied());
            if !self.ignore {
                // vLLM: `list(set(extra) | set(stop_token_ids))`; the engine
                // reads membership only: ascending here.
                let mut s = extra;
                s.extend(stops.iter().copied());
                stops = s.into_iter().collect();
            }
        }
        StopIds {
            stop_token_ids: stops,
            all_stop_token_ids: all,
            eos_token_id: if self.ignore { None } else { self.token_id },
        }
    }
}

/// The stop-id fields of `SamplingParams` ([`Eos::stop_ids`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopIds {
    /// `stop_token_ids`.
    pub stop_token_ids: Vec<i64>,
    /// `_all_stop_token_ids`.
    pub all_stop_token_ids: BTreeSet<i64>,
    /// `_eos_token_id`.
    pub eos_token_id: Option<i64>,
}

/// A request under construction ([`EngineCoreRequest::builder`]).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build`"]
pub struct RequestBuilder {
    request: EngineCoreRequest,
    eos: Eos,
    stop_token_ids: Vec<i64>,
    max_model_len: Option<i64>,
}

impl EngineCoreRequest {
    /// A request for `prompt_token_ids` generating at most `max_tokens`,
    /// named `request_id`, with the model's [`Eos`] facts: everything the
    /// engine requires and its decoder does not check. Sampling defaults
    /// are vLLM's (`temperature` 1.0, `top_p` 1.0, ...); `arrival_time` is
    /// 0.0 until [`RequestBuilder::arrival_time`] (the engine reads it for
    /// its metrics only).
    ///
    /// ```
    /// use engine_protocol::typed::{Constraint, EngineCoreRequest, Eos};
    ///
    /// let request = EngineCoreRequest::builder("req-1", vec![1_i64, 15043, 29892], 64, Eos::token(2))
    ///     .temperature(0.7)
    ///     .stop(["\n\n"])
    ///     .constraint(Constraint::Regex("[0-9]+".into()), "xgrammar")
    ///     .build()?;
    /// assert_eq!(request.serving_problems(None), []);
    /// let sp = request.sampling_params.as_ref().unwrap();
    /// assert_eq!((sp.max_tokens, sp.eos_token_id), (Some(64), Some(2)));
    /// # Ok::<(), engine_protocol::Error>(())
    /// ```
    ///
    /// Leaving out what the engine requires does not compile:
    ///
    /// ```compile_fail
    /// use engine_protocol::typed::EngineCoreRequest;
    /// // No max_tokens and no EOS facts.
    /// let request = EngineCoreRequest::builder("req-1", vec![1_i64, 2, 3]).build();
    /// ```
    ///
    /// ```compile_fail
    /// use engine_protocol::typed::{Constraint, EngineCoreRequest, Eos};
    /// // A constraint without the backend that compiles it.
    /// let request = EngineCoreRequest::builder("req-1", vec![1_i64], 8, Eos::token(2))
    ///     .constraint(Constraint::Regex("a+".into()))
    ///     .build();
    /// ```
    ///
    /// and what types cannot rule out is refused by
    /// [`RequestBuilder::build`], naming the field:
    ///
    /// ```
    /// use engine_protocol::typed::{EngineCoreRequest, Eos, ServingProblem};
    /// use engine_protocol::RejectClass;
    ///
    /// let e = EngineCoreRequest::builder("", vec![1_i64], 8, Eos::token(2)).build().unwrap_err();
    /// assert_eq!(e.serving, Some(ServingProblem::EmptyRequestId));
    /// let e = EngineCoreRequest::builder("r", Vec::<i64>::new(), 8, Eos::token(2)).build().unwrap_err();
    /// assert_eq!(e.serving, Some(ServingProblem::NoPrompt));
    /// let e = EngineCoreRequest::builder("r", vec![1_i64; 9], 8, Eos::token(2)).max_model_len(8).build().unwrap_err();
    /// assert_eq!(e.serving, Some(ServingProblem::PromptTooLong { prompt: 9, max_model_len: 8 }));
    /// // The rules of the engine's decoder (`__post_init__`).
    /// let e = EngineCoreRequest::builder("r", vec![1_i64], 0, Eos::token(2)).build().unwrap_err();
    /// assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, "EngineCoreRequest.sampling_params.max_tokens"));
    /// let e = EngineCoreRequest::builder("r", vec![1_i64], 8, Eos::token(2)).temperature(-1.0).build().unwrap_err();
    /// assert_eq!(e.path, "EngineCoreRequest.sampling_params.temperature");
    /// ```
    pub fn builder(
        request_id: impl Into<String>,
        prompt_token_ids: impl Into<TokenIds>,
        max_tokens: u32,
        eos: Eos,
    ) -> RequestBuilder {
        RequestBuilder {
            request: EngineCoreRequest {
                request_id: request_id.into(),
                prompt_token_ids: Some(prompt_token_ids.into()),
                sampling_params: Some(SamplingParams {
                    max_tokens: Some(i128::from(max_tokens)),
                    ..SamplingParams::default()
                }),
                ..EngineCoreRequest::default()
            },
            eos,
            stop_token_ids: Vec::new(),
            max_model_len: None,
        }
    }
}

impl RequestBuilder {
    fn sp(&mut self) -> &mut SamplingParams {
        self.request.sampling_params.get_or_insert_with(SamplingParams::default)
    }

    /// `temperature` (0 is greedy).
    pub fn temperature(mut self, t: f64) -> Self {
        self.sp().temperature = t;
        self
    }

    /// `top_p`.
    pub fn top_p(mut self, p: f64) -> Self {
        self.sp().top_p = p;
        self
    }

    /// `top_k` (0 or -1: all tokens).
    pub fn top_k(mut self, k: i64) -> Self {
        self.sp().top_k = i128::from(k);
        self
    }

    /// `seed`.
    pub fn seed(mut self, seed: i64) -> Self {
        self.sp().seed = Some(i128::from(seed));
        self
    }

    /// `min_tokens`: EOS and stop ids are ignored before this many.
    pub fn min_tokens(mut self, n: u32) -> Self {
        self.sp().min_tokens = i128::from(n);
        self
    }

    /// Stop strings. The engine stops on them only when told so by a
    /// frontend's detokenizer: it sees ids, not text (docs/translation.md;
    /// `translate` detects them for you).
    pub fn stop<S: Into<String>>(mut self, stops: impl IntoIterator<Item = S>) -> Self {
        self.sp().stop = Some(StopStrings::Many(stops.into_iter().map(Into::into).collect()));
        self
    }

    /// `stop_token_ids`: the request also stops on these ids.
    pub fn stop_token_ids(mut self, ids: impl IntoIterator<Item = i64>) -> Self {
        self.stop_token_ids = ids.into_iter().collect();
        self
    }

    /// `logprobs`: the top `k` logprobs of each sampled token (0: the
    /// sampled token's only).
    pub fn logprobs(mut self, k: i64) -> Self {
        self.sp().logprobs = Some(i128::from(k));
        self
    }

    /// `output_kind`: every step's new tokens (`Delta`, what a streaming
    /// gateway wants), all of them so far, or only the final output.
    pub fn output_kind(mut self, kind: RequestOutputKind) -> Self {
        self.sp().output_kind = kind;
        self
    }

    /// The one structured-output constraint, and the backend that compiles
    /// it (`xgrammar`, `guidance`, `outlines`, `lm-format-enforcer`; one
    /// per engine, docs/wire-protocol.md §10.1).
    pub fn constraint(mut self, constraint: Constraint, backend: impl Into<String>) -> Self {
        self.sp().structured_outputs = Some(StructuredOutputsParams::new(constraint, backend));
        self
    }

    /// `arrival_time` (seconds since the epoch, the engine's metrics).
    pub fn arrival_time(mut self, t: f64) -> Self {
        self.request.arrival_time = t;
        self
    }

    /// The engine's `max_model_len` (from its registration): `build`
    /// refuses a longer prompt, which the engine does not check and dies of.
    pub fn max_model_len(mut self, n: i64) -> Self {
        self.max_model_len = Some(n);
        self
    }

    /// Any other sampling parameter. `build` still checks the result.
    pub fn sampling(mut self, f: impl FnOnce(&mut SamplingParams)) -> Self {
        f(self.sp());
        self
    }

    /// The request, with the stop-id fields derived ([`Eos::stop_ids`]);
    /// an error of class `validation` naming the field for a request the
    /// engine's decoder refuses (its `SamplingParams` rules) or the engine
    /// fails at run time ([`Error::serving`] says which).
    pub fn build(mut self) -> Result<EngineCoreRequest, Error> {
        let ids = self.eos.stop_ids(&self.stop_token_ids);
        let ignore = self.eos.is_ignored();
        let sp = self.sp();
        sp.ignore_eos = ignore;
        sp.eos_token_id = ids.eos_token_id.map(i128::from);
        sp.all_stop_token_ids = ids.all_stop_token_ids.into_iter().collect();
        sp.stop_token_ids = (!ids.stop_token_ids.is_empty()).then(|| ids.stop_token_ids.into());
        let mut request = self.request;
        // The prompt as the int32 array vLLM's frontend sends (0.34.0 on),
        // written as a list to releases that take lists: an id outside
        // int32 is in no vocabulary, and vLLM's frontend cannot send it.
        if let Some(ids) = request.prompt_token_ids.as_mut() {
            if ids.list().is_some() {
                *ids = TokenIds::from_array(
                    ids.to_int32_array().map_err(|e| e.under("EngineCoreRequest.prompt_token_ids"))?,
                );
            }
        }
        if let Some(problem) = request.first_fatal_problem(self.max_model_len) {
            return Err(Error::unservable(problem));
        }
        if let Some(sp) = &request.sampling_params {
            first_violation(sp, SAMPLING_PARAMS_RULES).map_err(|v| {
                let path = match v.path() {
                    p if p.is_empty() => "EngineCoreRequest.sampling_params".to_string(),
                    p => format!("EngineCoreRequest.sampling_params.{p}"),
                };
                Error::new(RejectClass::Validation, path, v.message)
            })?;
        }
        Ok(request)
    }
}
