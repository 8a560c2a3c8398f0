//! Request translation for the TokenSpeed dialect: a gateway-level
//! [`GenerateRequest`] into the `TokenizedGenerateReqInput` ADD payload
//! that TokenSpeed 0.1.1's own frontend would send for the same request
//! ([`translate`], [`encode_request`]).
//!
//! The reference is TokenSpeed 0.1.1's request handler,
//! `tokenspeed.runtime.engine.input_processor.InputProcessor.tokenize_one_request`
//! run on a `GenerateReqInput` with token ids (the engine started with
//! `skip_tokenizer_init`, as behind a gateway), checked by the
//! `tokenspeed_translation` goldens under
//! `golden/tokenspeed/0.1.1/translation/`. The facts relied on
//! (docs/translation.md, "TokenSpeed"; docs/tokenspeed-wire.md §10):
//!
//! - a prompt longer than `max_model_len - 1` is refused (the handler's
//!   fallback input limit `context_len - 1`; the ready response's
//!   `max_model_len` is the model's `context_len`);
//! - `max_new_tokens` is `max_model_len - prompt_len` when the client gives
//!   none, and an explicit value that reaches the end of the context is cut
//!   to that room (the handler truncates with a warning; it never refuses);
//! - the sampling parameters are sent normalised (`is_normalized` true),
//!   finalised by the same functions the engine's receive path uses
//!   ([`crate::validate::tokenspeed::post_init`], [`crate::validate::tokenspeed::resolve_seed`],
//!   [`crate::validate::tokenspeed::normalize`]): unset `top_k` becomes
//!   [`crate::validate::tokenspeed::TOP_K_ALL`], a temperature below
//!   [`crate::validate::tokenspeed::GREEDY_BELOW`] collapses to greedy (temperature
//!   1.0, `top_k` 1), greedy pins the seed to 0, and an unset seed becomes
//!   the CRC-32 of the request id. The frontend resolves the seed before
//!   sending, so the engine's result equals what the frontend would send;
//! - [`crate::validate::tokenspeed::verify`] is run on what is sent: a request the
//!   engine would abort is refused here, before anything is sent;
//! - logprobs: only the sampled token's (`logprobs` 0, sent as
//!   `SamplingParams.logprobs = 0` with `return_logprob` true); top-k and
//!   prompt logprobs are refused, and so is any logprob request to an engine
//!   started without `--enable-output-logprobs`;
//! - `logprob_start_len` is always the last prompt token (the handler's
//!   `resolve_logprob_start_len(-1, prompt_len)`), `top_logprobs_num` 0;
//! - no EOS is added: TokenSpeed's engine stops at EOS itself;
//! - string stops are the gateway's job ([`StopParams`]); the engine gets
//!   none unless [`TokenSpeedOptions::send_stop_strings`] is set;
//! - the whole 25-element struct is encoded (the tag and all 24 fields),
//!   as TokenSpeed's own `MsgpackEncoder` writes it, not SMG's 11-element
//!   prefix (docs/tokenspeed-wire.md §3.3: both decode the same).
//!
//! The request is built as the typed struct [`TokenizedGenerateReqInput`]
//! and written by its direct encoder; the sampling parameters pass through
//! their decoded form only for the engine's finalisation functions, which
//! work on values.
//!
//! Where a gateway must go beyond the handler (it fans out `n` itself, it
//! cannot express `choice` or `json_object`), [`TokenSpeedOptions`] and the
//! refusals say so; see docs/translation.md.

use super::request::{ConstraintFields, GenerateRequest, TranslateError, TranslateErrorClass};
use super::stop::{StopParams, StopSemantics};
use super::tokenizer::GatewayTokenizer;
use crate::schema::tokenspeed::{RECEIVE_0_1_1, V0_1_1};
use crate::typed::tokenspeed::{Rid, SamplingParams, TokenizedGenerateReqInput};
use crate::typed::{IntList, StopStrings};
use crate::validate::tokenspeed as ts;
use crate::value::{StructValue, Value};

/// What the gateway knows about the TokenSpeed engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSpeedEngineInfo {
    /// The ready response's `max_model_len` (the model's `context_len`).
    pub max_model_len: i64,
    /// The model's vocabulary size (`logit_bias` keys and, by default,
    /// prompt ids must lie below it); `None` when unknown.
    pub vocab_size: Option<u32>,
    /// Whether the engine runs with `--enable-output-logprobs`.
    pub enable_output_logprobs: bool,
}

impl TokenSpeedEngineInfo {
    /// The receive-path configuration of the same engine.
    pub fn engine_config(&self) -> ts::EngineConfig {
        ts::EngineConfig { vocab_size: self.vocab_size, enable_output_logprobs: self.enable_output_logprobs }
    }
}

/// Gateway policy knobs. [`TokenSpeedOptions::default`] is the gateway
/// defaults of docs/translation.md ("TokenSpeed");
/// [`TokenSpeedOptions::tokenspeed_parity`] drops the checks TokenSpeed's
/// own handler does not make (the `tokenspeed_translation` goldens).
#[derive(Debug, Clone)]
pub struct TokenSpeedOptions {
    /// `TokenizedGenerateReqInput.stream` (it changes only the engine's
    /// emission cadence). Default true.
    pub stream: bool,
    /// `TokenizedGenerateReqInput.created_time` (TokenSpeed's frontend
    /// writes its wall clock). Default 0.0.
    pub created_time: f64,
    /// Tokens the engine reserves behind the prompt: the longest prompt
    /// is `max_model_len - input_reserve`. Default 1 (the handler's
    /// fallback; an engine with speculative decoding reserves more).
    pub input_reserve: i64,
    /// An explicit `max_tokens` that reaches past the context: `true`
    /// refuses it, `false` (default, TokenSpeed's behaviour) cuts it to the
    /// room left and reports a warning.
    pub reject_max_tokens_over_room: bool,
    /// Send the stop strings to the engine too (`stop`, `stop_strs`,
    /// `stop_str_max_len` in characters), as TokenSpeed's own frontend
    /// does. Default false: the gateway's detector handles them.
    pub send_stop_strings: bool,
    /// Refuse prompt ids at or above the vocabulary size
    /// ([`TokenSpeedEngineInfo::vocab_size`], else the tokenizer's).
    /// TokenSpeed's handler does not check them. Default true.
    pub check_prompt_vocab: bool,
    /// Count `structural_tag` among the constraints of which at most one may
    /// be set. TokenSpeed counts only `json_schema`, `regex` and `ebnf`.
    /// Default true.
    pub structural_tag_is_exclusive: bool,
    /// Treat `logprobs: 1` as the sampled token's logprob (SMG's mapping).
    /// Default false: only 0 is carried, as TokenSpeed's `verify` says.
    pub logprobs_one_as_sampled: bool,
    /// `TokenizedGenerateReqInput.data_parallel_rank`. Default none.
    pub data_parallel_rank: Option<i64>,
    /// The stop semantics written into [`TokenSpeedTranslated::stop`].
    pub stop_semantics: StopSemantics,
}

impl Default for TokenSpeedOptions {
    fn default() -> Self {
        TokenSpeedOptions {
            stream: true,
            created_time: 0.0,
            input_reserve: 1,
            reject_max_tokens_over_room: false,
            send_stop_strings: false,
            check_prompt_vocab: true,
            structural_tag_is_exclusive: true,
            logprobs_one_as_sampled: false,
            data_parallel_rank: None,
            stop_semantics: StopSemantics::Vllm,
        }
    }
}

impl TokenSpeedOptions {
    /// What TokenSpeed 0.1.1's own handler does for the same request: stop
    /// strings sent to the engine, no prompt vocabulary check,
    /// `structural_tag` not counted among the exclusive constraints.
    pub fn tokenspeed_parity() -> Self {
        TokenSpeedOptions {
            send_stop_strings: true,
            check_prompt_vocab: false,
            structural_tag_is_exclusive: false,
            ..Default::default()
        }
    }
}

/// A translated request: one ADD payload.
#[derive(Debug, Clone)]
pub struct TokenSpeedTranslated {
    /// The request id (`rid`).
    pub request_id: String,
    /// The `TokenizedGenerateReqInput` (a `Value::Struct` of the 0.1.1
    /// table), encodable with `encode_message(V0_1_1, EngineCoreRequest)`;
    /// the same request as [`TokenSpeedTranslated::typed`].
    pub request: Value,
    /// The request as the typed struct, which [`encode_frames`] writes.
    pub typed: TokenizedGenerateReqInput,
    /// What the gateway's stop detector needs.
    pub stop: StopParams,
    /// `SamplingParams.max_new_tokens` as sent.
    pub max_new_tokens: i64,
    /// The prompt's length in tokens.
    pub prompt_len: usize,
    /// Reported, not fatal (e.g. `max_tokens` cut to the room left).
    pub warnings: Vec<String>,
}

impl TokenSpeedTranslated {
    /// The `SamplingParams` that go on the wire, as a decoded struct
    /// (typed: `self.typed.sampling_params`).
    pub fn sampling_params(&self) -> Option<&StructValue> {
        match &self.request {
            Value::Struct(s) => s.struct_field("sampling_params"),
            _ => None,
        }
    }
}

fn refuse<T>(class: TranslateErrorClass, field: &str, message: impl Into<String>) -> Result<T, TranslateError> {
    Err(TranslateError { class, field: field.into(), message: message.into() })
}

/// The gateway's name of a TokenSpeed `SamplingParams` field.
pub fn gateway_field(sampling_field: &str) -> String {
    match sampling_field {
        "max_new_tokens" => "max_tokens".into(),
        "min_new_tokens" => "min_tokens".into(),
        "json_schema" => "structured_outputs.json".into(),
        "regex" => "structured_outputs.regex".into(),
        "ebnf" => "structured_outputs.grammar".into(),
        "structural_tag" => "structured_outputs.structural_tag".into(),
        other => other.into(),
    }
}

/// The constraint fields as TokenSpeed's `(json_schema, regex, ebnf,
/// structural_tag)`.
type Grammars = (Option<String>, Option<String>, Option<String>, Option<String>);

fn constraint(c: &ConstraintFields, opts: &TokenSpeedOptions) -> Result<Grammars, TranslateError> {
    let so = |n: &str| format!("structured_outputs.{n}");
    if c.choice.is_some() {
        return refuse(
            TranslateErrorClass::Unsupported,
            &so("choice"),
            "TokenSpeed has no choice constraint; send it as a regex or grammar",
        );
    }
    if c.json_object == Some(true) {
        return refuse(
            TranslateErrorClass::Unsupported,
            &so("json_object"),
            "TokenSpeed has no json_object constraint; send a JSON schema",
        );
    }
    let mut exclusive: Vec<&str> = Vec::new();
    if c.json.is_some() {
        exclusive.push("json");
    }
    if c.regex.is_some() {
        exclusive.push("regex");
    }
    if c.grammar.is_some() {
        exclusive.push("grammar");
    }
    if opts.structural_tag_is_exclusive && c.structural_tag.is_some() {
        exclusive.push("structural_tag");
    }
    if exclusive.len() > 1 {
        let fields = exclusive.iter().map(|n| so(n)).collect::<Vec<_>>().join(",");
        return refuse(
            TranslateErrorClass::Conflict,
            &fields,
            format!("at most one structured-output constraint may be set, got {}", exclusive.join(", ")),
        );
    }
    let json = match &c.json {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        // The gateway serialises a schema object compactly, keys in request
        // order.
        Some(v) => Some(serde_json::to_string(v).map_err(|e| TranslateError {
            class: TranslateErrorClass::Malformed,
            field: so("json"),
            message: format!("the schema does not serialise: {e}"),
        })?),
    };
    Ok((json, c.regex.clone(), c.grammar.clone(), c.structural_tag.clone()))
}

/// Translates a gateway request into the ADD payload TokenSpeed 0.1.1's
/// frontend would send, or refuses it with the reason the engine (or its
/// frontend) would give.
pub fn translate(
    req: &GenerateRequest,
    info: &TokenSpeedEngineInfo,
    tok: &GatewayTokenizer,
    opts: &TokenSpeedOptions,
) -> Result<TokenSpeedTranslated, TranslateError> {
    let mut warnings = Vec::new();
    let (prompt_len, prompt) = check_n_and_prompt(req, info, tok, opts)?;
    let max_new_tokens = max_new_tokens(req, info, opts, prompt, &mut warnings)?;
    let (typed_sp, logprobs) = draft_sampling_params(req, opts, max_new_tokens)?;
    let sp = finalise_sampling_params(&typed_sp, req, info)?;
    let return_logprob = logprobs.is_some();
    check_logprobs_carried(req, info, return_logprob)?;

    let typed = TokenizedGenerateReqInput {
        rid: Some(Rid::One(req.request_id.clone())),
        input_ids: Some(req.prompt_token_ids.iter().map(|&t| i64::from(t)).collect()),
        sampling_params: SamplingParams::from_struct(&V0_1_1, &sp).map_err(internal)?,
        return_logprob,
        logprob_start_len: i128::from((prompt - 1).max(0)),
        // `top_logprobs_num` stays at its default, 0: only the sampled
        // token's logprob is carried (the socket's gate).
        stream: opts.stream,
        created_time: opts.created_time,
        data_parallel_rank: opts.data_parallel_rank.map(i128::from),
        ..TokenizedGenerateReqInput::default()
    };
    let request = typed.to_value(&V0_1_1).map_err(internal)?;
    let Value::Struct(r) = &request else {
        return refuse(TranslateErrorClass::Malformed, "request", "the request table is not a struct");
    };
    // The engine socket's logprob gate, on what is sent (it cannot fail
    // after the checks above; kept so the two can never drift apart).
    if let Err(v) = ts::logprob_gate(r, &RECEIVE_0_1_1, &info.engine_config()) {
        return refuse(TranslateErrorClass::Unsupported, "logprobs", format!("{}: {}", v.path(), v.message));
    }

    let stop = StopParams {
        stop: req.stop.clone(),
        include_stop_str_in_output: req.include_stop_str_in_output,
        min_tokens: usize::try_from(req.min_tokens.unwrap_or(0)).unwrap_or(0),
        skip_special_tokens: req.skip_special_tokens.unwrap_or(true),
        spaces_between_special_tokens: req.spaces_between_special_tokens.unwrap_or(true),
        semantics: opts.stop_semantics,
        ..Default::default()
    };
    Ok(TokenSpeedTranslated {
        request_id: req.request_id.clone(),
        request,
        typed,
        stop,
        max_new_tokens,
        prompt_len,
        warnings,
    })
}

/// A table conversion that cannot fail on what the translation built
/// (`malformed` on `sampling_params` if it ever does).
fn internal(e: crate::Error) -> TranslateError {
    TranslateError { class: TranslateErrorClass::Malformed, field: "sampling_params".into(), message: e.to_string() }
}

/// `n` (the gateway fans out itself: the engine aborts `n != 1`) and the
/// prompt (not empty, within the engine's maximum input length, and, when
/// asked, within the vocabulary): the prompt length, as a count and as the
/// `i64` the length arithmetic uses.
fn check_n_and_prompt(
    req: &GenerateRequest,
    info: &TokenSpeedEngineInfo,
    tok: &GatewayTokenizer,
    opts: &TokenSpeedOptions,
) -> Result<(usize, i64), TranslateError> {
    use TranslateErrorClass::*;
    match req.n {
        Some(n) if n < 1 => return refuse(InvalidValue, "n", format!("n must be at least 1, got {n}")),
        Some(n) if n > 1 => {
            return refuse(Unsupported, "n", format!("n={n}: one TokenSpeed request carries one sequence"))
        }
        _ => {}
    }
    let prompt_len = req.prompt_token_ids.len();
    if prompt_len == 0 {
        return refuse(InvalidValue, "prompt_token_ids", "the prompt cannot be empty");
    }
    let prompt = i64::try_from(prompt_len).unwrap_or(i64::MAX);
    let max_input = info.max_model_len.saturating_sub(opts.input_reserve.max(1));
    if prompt > max_input {
        return refuse(
            TooLong,
            "prompt_token_ids",
            format!("the prompt ({prompt} tokens) exceeds the engine's maximum input length ({max_input} tokens)"),
        );
    }
    if opts.check_prompt_vocab {
        let vocab = info.vocab_size.map_or(tok.vocab_size(), |v| v as usize);
        if let Some(bad) = req.prompt_token_ids.iter().find(|&&t| t as usize >= vocab) {
            return refuse(
                InvalidValue,
                "prompt_token_ids",
                format!("token id {bad} is out of vocabulary (size {vocab})"),
            );
        }
    }
    Ok((prompt_len, prompt))
}

/// `max_new_tokens`: the room left when unset; cut to it when it reaches
/// the end of the context (or refused, with
/// [`TokenSpeedOptions::reject_max_tokens_over_room`]).
fn max_new_tokens(
    req: &GenerateRequest,
    info: &TokenSpeedEngineInfo,
    opts: &TokenSpeedOptions,
    prompt: i64,
    warnings: &mut Vec<String>,
) -> Result<i64, TranslateError> {
    let room = info.max_model_len - prompt;
    Ok(match req.max_tokens {
        None => room,
        Some(m) if i128::from(m) + i128::from(prompt) >= i128::from(info.max_model_len) => {
            if m > room {
                if opts.reject_max_tokens_over_room {
                    return refuse(
                        TranslateErrorClass::TooLong,
                        "max_tokens",
                        format!(
                            "max_tokens ({m}) plus the prompt ({prompt}) exceeds max_model_len ({})",
                            info.max_model_len
                        ),
                    );
                }
                warnings.push(format!("max_tokens {m} cut to {room}, the room left in the context"));
            }
            room
        }
        Some(m) => m,
    })
}

/// The typed `SamplingParams` the frontend builds from the request, before
/// its finalisation, and the logprob count sent: fields TokenSpeed's
/// `SamplingParams` does not have are refused.
fn draft_sampling_params(
    req: &GenerateRequest,
    opts: &TokenSpeedOptions,
    max_new_tokens: i64,
) -> Result<(SamplingParams, Option<i64>), TranslateError> {
    if req.allowed_token_ids.is_some() {
        return refuse(TranslateErrorClass::Unsupported, "allowed_token_ids", "TokenSpeed has no allowed_token_ids");
    }
    let (json_schema, regex, ebnf, structural_tag) = match &req.structured_outputs {
        Some(c) => constraint(c, opts)?,
        None => (None, None, None, None),
    };
    let logprobs = match req.logprobs {
        Some(1) if opts.logprobs_one_as_sampled => Some(0),
        other => other,
    };
    let stop_token_ids = (!req.stop_token_ids.is_empty()).then(|| {
        let mut ids = req.stop_token_ids.clone();
        ids.sort_unstable();
        ids.dedup();
        IntList::from(ids)
    });
    let typed_sp = SamplingParams {
        max_new_tokens: Some(i128::from(max_new_tokens)),
        stop: (opts.send_stop_strings && !req.stop.is_empty()).then(|| StopStrings::Many(req.stop.clone())),
        stop_token_ids,
        temperature: req.temperature.unwrap_or(1.0),
        top_p: req.top_p.unwrap_or(1.0),
        top_k: req.top_k.map_or(-1, i128::from),
        min_p: req.min_p.unwrap_or(0.0),
        frequency_penalty: req.frequency_penalty.unwrap_or(0.0),
        presence_penalty: req.presence_penalty.unwrap_or(0.0),
        repetition_penalty: req.repetition_penalty.unwrap_or(1.0),
        min_new_tokens: req.min_tokens.map_or(0, i128::from),
        json_schema,
        regex,
        ebnf,
        structural_tag,
        ignore_eos: req.ignore_eos,
        skip_special_tokens: req.skip_special_tokens.unwrap_or(true),
        spaces_between_special_tokens: req.spaces_between_special_tokens.unwrap_or(true),
        no_stop_trim: req.include_stop_str_in_output,
        logit_bias: req.logit_bias.as_deref().map(logit_bias_dict),
        seed: req.seed.map(i128::from),
        logprobs: logprobs.map(i128::from),
        ..SamplingParams::default()
    };
    Ok((typed_sp, logprobs))
}

/// `logit_bias` as the Python dict the frontend sends: string keys, a
/// repeated key keeping its first place and its last value.
fn logit_bias_dict(bias: &[(i64, f64)]) -> Vec<(String, f64)> {
    let mut at: std::collections::HashMap<i64, usize> = std::collections::HashMap::with_capacity(bias.len());
    let mut m: Vec<(String, f64)> = Vec::with_capacity(bias.len());
    for &(id, b) in bias {
        match at.get(&id) {
            Some(&i) => m[i].1 = b,
            None => {
                at.insert(id, m.len());
                m.push((id.to_string(), b));
            }
        }
    }
    m
}

/// The frontend's finalisation, with the engine's own functions
/// (`post_init`, the seed from the request id, `normalize`, `verify`): the
/// sampling parameters' table struct, or the rule they break.
fn finalise_sampling_params(
    typed_sp: &SamplingParams,
    req: &GenerateRequest,
    info: &TokenSpeedEngineInfo,
) -> Result<StructValue, TranslateError> {
    use TranslateErrorClass::*;
    let mut sp = typed_sp.to_struct(&V0_1_1).map_err(internal)?;
    let rid = Value::Str(req.request_id.clone());
    ts::post_init(&mut sp, &RECEIVE_0_1_1);
    ts::resolve_seed(&mut sp, &rid).map_err(|v| TranslateError {
        class: Malformed,
        field: "request_id".into(),
        message: v.message,
    })?;
    ts::normalize(&mut sp);
    if let Err(v) = ts::verify(&sp, info.vocab_size) {
        // A rule on several fields is a conflict between them; the one
        // logprob count TokenSpeed carries is a limit of its wire.
        let class = match v.fields.as_slice() {
            ["logprobs"] => Unsupported,
            [_, _, ..] => Conflict,
            _ => InvalidValue,
        };
        let field = v.fields.iter().map(|f| gateway_field(f)).collect::<Vec<_>>().join(",");
        return refuse(class, &field, v.message);
    }
    Ok(sp)
}

/// Logprobs the engine cannot return: any, from an engine started without
/// `--enable-output-logprobs`; prompt logprobs, which the TokenSpeed wire
/// does not carry.
fn check_logprobs_carried(
    req: &GenerateRequest,
    info: &TokenSpeedEngineInfo,
    return_logprob: bool,
) -> Result<(), TranslateError> {
    if (return_logprob || req.prompt_logprobs.is_some()) && !info.enable_output_logprobs {
        let field = if return_logprob { "logprobs" } else { "prompt_logprobs" };
        return refuse(TranslateErrorClass::Unsupported, field, "the engine runs without --enable-output-logprobs");
    }
    if req.prompt_logprobs.is_some() {
        return refuse(
            TranslateErrorClass::Unsupported,
            "prompt_logprobs",
            "prompt logprobs are not carried on the TokenSpeed wire",
        );
    }
    Ok(())
}

/// The ADD payload bytes: the frame after the request-type byte `00` (the
/// request has no tensors, so there are no aux frames).
pub fn encode_request(t: &TokenSpeedTranslated) -> Result<Vec<u8>, crate::Error> {
    Ok(encode_frames(t)?.swap_remove(1))
}

/// The ADD frames as sent: `[00, payload]`.
pub fn encode_frames(t: &TokenSpeedTranslated) -> Result<Vec<Vec<u8>>, crate::Error> {
    let frames = t.typed.encode(&V0_1_1)?;
    if frames.len() != 2 {
        return Err(crate::Error::new(
            crate::RejectClass::Frames,
            "TokenizedGenerateReqInput",
            format!("a translated request is [type, payload], got {} frames", frames.len()),
        ));
    }
    Ok(frames)
}
