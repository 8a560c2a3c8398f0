//! `tokenspeed_translation`: a gateway request through
//! `engine_protocol::translate::tokenspeed::translate` (TokenSpeed-parity
//! options), compared with what TokenSpeed 0.1.1's own request handler
//! (`InputProcessor.tokenize_one_request`, encoded by its `MsgpackEncoder`)
//! built for the same request (generator:
//! `golden/generate/tokenspeed/generate_translation.py`).
//!
//! - Accepted requests: our ADD payload must equal TokenSpeed's byte for
//!   byte, or, only when the request has two or more distinct
//!   `stop_token_ids` (Python writes a set in hash order; we write it
//!   ascending), decode to the same view.
//! - Refused requests: TokenSpeed's exception is classified into the
//!   vocabulary of [`TranslateErrorClass`] plus the gateway parameter(s) it
//!   names ([`classify_tokenspeed_error`]); ours must have the same class
//!   and parameters. A message the classifier does not know fails the case.
//! - A case whose own input is unusable fails, whatever it expects.
//!
//! docs/case-format.md ("tokenspeed_translation") describes the shapes.

use engine_protocol::translate::tokenspeed::{
    encode_request, gateway_field, translate, TokenSpeedEngineInfo, TokenSpeedOptions, TokenSpeedTranslated,
};
use engine_protocol::translate::{GenerateRequest, TranslateError, TranslateErrorClass};
use engine_protocol::view::{diff, to_view};
use engine_protocol::{decode_message, Limits, MessageKind};
use serde_json::Value as Json;

use super::translation::{refused_alike, ErrorKey};
use super::{tokenizer_for, KindError};
use engine_testkit::corpus::Case;

/// The engine facts and options a case runs under.
pub fn setup(input: &Json) -> Result<(TokenSpeedEngineInfo, TokenSpeedOptions), KindError> {
    let missing = |k: &str| KindError::missing(format!("input.{k}"));
    let max_model_len = input.get("max_model_len").and_then(Json::as_i64).ok_or_else(|| missing("max_model_len"))?;
    let vocab_size = match input.get("vocab_size") {
        None | Some(Json::Null) => None,
        Some(v) => Some(v.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or_else(|| missing("vocab_size"))?),
    };
    let enable_output_logprobs =
        input.get("enable_output_logprobs").and_then(Json::as_bool).ok_or_else(|| missing("enable_output_logprobs"))?;
    let mut opts = TokenSpeedOptions::tokenspeed_parity();
    opts.stream = input.get("stream").and_then(Json::as_bool).ok_or_else(|| missing("stream"))?;
    opts.created_time = input.get("created_time").and_then(Json::as_f64).ok_or_else(|| missing("created_time"))?;
    Ok((TokenSpeedEngineInfo { max_model_len, vocab_size, enable_output_logprobs }, opts))
}

/// Runs the case's request through `translate`. The outer error is a
/// problem with the case itself.
pub fn run(case: &Case, input: &Json) -> Result<Result<TokenSpeedTranslated, TranslateError>, KindError> {
    let tok = tokenizer_for(case, input)?;
    let (info, opts) = setup(input)?;
    let req = input.get("request").ok_or_else(|| KindError::missing("input.request"))?;
    let req = GenerateRequest::from_json(req).map_err(|e| KindError::Request(Box::new(e)))?;
    Ok(translate(&req, &info, &tok, &opts))
}

/// The gateway name of a field TokenSpeed's `SamplingParams` does not have
/// (passed under its own name, refused as an unexpected keyword).
fn unknown_keyword(name: &str) -> String {
    match name {
        "choice" | "json_object" => format!("structured_outputs.{name}"),
        other => other.to_string(),
    }
}

/// Classifies TokenSpeed's refusal (`type`, `message`) of `request` (the
/// case's gateway request, for messages that do not name the parameter)
/// into the vocabulary our errors use. `None` for a message no rule knows.
pub fn classify_tokenspeed_error(kind: &str, message: &str, request: &Json) -> Option<ErrorKey> {
    use TranslateErrorClass::*;
    let one = |class, p: &str| Some((class, vec![p.to_string()]));
    let m = message.trim();
    if kind == "TypeError" {
        let name = m.strip_prefix("Unexpected keyword argument '")?.strip_suffix('\'')?;
        return one(Unsupported, &unknown_keyword(name));
    }
    if m.starts_with("The input (") && m.contains("exceeds the engine's maximum input length") {
        return one(TooLong, "prompt_token_ids");
    }
    if m.starts_with("Only one of regex, json_schema, or ebnf can be set") {
        let so = request.get("structured_outputs")?;
        let set: Vec<String> = ["json", "regex", "grammar"]
            .into_iter()
            .filter(|k| so.get(*k).is_some_and(|v| !v.is_null()))
            .map(|k| format!("structured_outputs.{k}"))
            .collect();
        return (set.len() > 1).then_some((Conflict, set));
    }
    if m.starts_with("logprobs=") && m.contains("is not supported") {
        return one(Unsupported, "logprobs");
    }
    if m.starts_with("logprobs were requested but the server was started without enable_output_logprobs") {
        let asked = request.get("logprobs").is_some_and(|v| !v.is_null());
        return one(Unsupported, if asked { "logprobs" } else { "prompt_logprobs" });
    }
    if m.starts_with("logprob_start_len >= 0 (prompt logprobs) is not supported") {
        return one(Unsupported, "prompt_logprobs");
    }
    // "<SamplingParams field> must ...".
    let mut words = m.split_whitespace();
    let (p, verb) = (words.next()?, words.next()?);
    let is_field = p.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    (is_field && verb == "must").then(|| (InvalidValue, vec![gateway_field(p)]))
}

/// The TokenSpeed version the translation layer writes requests for.
pub const TARGET_VERSION: &str = engine_protocol::schema::tokenspeed::V0_1_1.version;

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), KindError> {
    match (expected.get("error"), run(case, input)?) {
        (Some(want), Err(e)) => same_refusal(want, input, e),
        (Some(e), Ok(_)) => Err(KindError::ExpectedRefusal { want: e.clone() }),
        (None, Err(e)) => Err(KindError::Refused(Box::new(e))),
        (None, Ok(t)) => same_payload(case, input, expected, &t),
    }
}

/// TokenSpeed's refusal `want` (`expected.error`) and ours, `e`: the same
/// class naming the same parameters.
fn same_refusal(want: &Json, input: &Json, e: TranslateError) -> Result<(), KindError> {
    let kind = want.get("type").and_then(Json::as_str).ok_or_else(|| KindError::missing("expected.error.type"))?;
    let message =
        want.get("message").and_then(Json::as_str).ok_or_else(|| KindError::missing("expected.error.message"))?;
    let request = input.get("request").ok_or_else(|| KindError::missing("input.request"))?;
    let want = classify_tokenspeed_error(kind, message, request).ok_or_else(|| KindError::Unclassified {
        engine: "TokenSpeed",
        kind: Some(kind.to_string()),
        message: message.to_string(),
    })?;
    refused_alike("TokenSpeed", &want, message, e)
}

/// Our ADD payload against TokenSpeed's (`expected.payload`): the same
/// bytes, or the same view with a set of two or more ids in another order.
fn same_payload(case: &Case, input: &Json, expected: &Json, t: &TokenSpeedTranslated) -> Result<(), KindError> {
    let want = expected.get("payload").and_then(Json::as_str).ok_or_else(|| KindError::missing("expected.payload"))?;
    let want = engine_testkit::hex::decode(want).map_err(KindError::PayloadHex)?;
    let ours = encode_request(t).map_err(|e| KindError::OurEncode(Box::new(e)))?;
    if ours == want {
        return Ok(());
    }
    // Equal up to set order: the same view.
    let rel = case.release().ok_or(KindError::NoSchemaTable)?;
    let ty = MessageKind::EngineCoreRequest.payload_type(rel);
    let theirs = decode_message(rel, MessageKind::EngineCoreRequest, &[&[0u8][..], &want[..]], &Limits::default())
        .map_err(|error| KindError::TheirDecode { engine: "TokenSpeed", error: Box::new(error) })?;
    let (theirs, ours_view) = (to_view(ty, &theirs.value), to_view(ty, &t.request));
    if let Some((path, what)) = diff(&theirs, &ours_view) {
        return Err(KindError::PayloadDiffers { path, what });
    }
    // Only a set of two or more ids may be written in another order.
    let ids = input.pointer("/request/stop_token_ids").and_then(Json::as_array).map_or(0, |xs| {
        let mut xs: Vec<String> = xs.iter().map(Json::to_string).collect();
        xs.sort();
        xs.dedup();
        xs.len()
    });
    if ids < 2 {
        return Err(KindError::BytesDiffer);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::check::{check as check_case, Verdict};
    use crate::corpus;

    fn golden(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/tokenspeed/0.1.1/translation").join(name)
    }

    /// The committed case `name` after `mutate`, parsed at its own path.
    fn case(name: &str, mutate: impl FnOnce(&mut Json)) -> Case {
        let path = golden(name);
        let mut json: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        mutate(&mut json);
        corpus::parse_case(&path, &json).unwrap()
    }

    fn verdict(c: &Case) -> Verdict {
        check_case(c)
    }

    #[test]
    fn committed_cases_of_both_outcomes_pass() {
        for name in ["default.json", "stop_token_ids.json", "top_k_128.json", "choice.json"] {
            assert!(matches!(verdict(&case(name, |_| {})), Verdict::Pass), "{name}");
        }
    }

    #[test]
    fn a_payload_that_differs_by_one_byte_fails() {
        // The last byte is data_parallel_rank (nil, c0); c2 is false.
        let c = case("max_tokens.json", |j| {
            let p = j["expected"]["payload"].as_str().unwrap().to_string();
            j["expected"]["payload"] = json_str(format!("{}c2", &p[..p.len() - 2]));
        });
        assert!(matches!(verdict(&c), Verdict::Fail(_)));
    }

    #[test]
    fn another_requests_payload_fails() {
        // A payload that decodes, but to another request (max_new_tokens 0).
        let other = case("max_tokens_zero.json", |_| {});
        let want = match &other.body {
            engine_testkit::corpus::Body::Other { expected, .. } => expected["payload"].clone(),
            _ => unreachable!(),
        };
        let c = case("max_tokens.json", |j| j["expected"]["payload"] = want);
        assert!(matches!(verdict(&c), Verdict::Fail(_)));
    }

    #[test]
    fn a_refusal_of_another_class_or_parameter_fails() {
        let c = case("top_k_128.json", |j| {
            j["expected"]["error"]["message"] = json_str("top_p must be in (0, 1], got 1.5.".into());
        });
        assert!(matches!(verdict(&c), Verdict::Fail(_)));
        let c = case("default.json", |j| {
            j["expected"] = serde_json::json!({"error": {"type": "ValueError", "message": "top_k must be > 0"}});
        });
        assert!(matches!(verdict(&c), Verdict::Fail(_)));
    }

    #[test]
    fn an_unclassified_message_fails() {
        let c = case("top_k_128.json", |j| {
            j["expected"]["error"]["message"] = json_str("something new went wrong".into());
        });
        match verdict(&c) {
            Verdict::Fail(why) => assert!(why.contains("outside the classified vocabulary"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tokenspeed_messages_are_classified_by_gateway_field() {
        let r = serde_json::json!({"structured_outputs": {"json": "{}", "regex": "a"}, "logprobs": 0});
        let k = |t: &str, m: &str| classify_tokenspeed_error(t, m, &r).map(|(c, p)| (c.as_str(), p.join(",")));
        assert_eq!(
            k("ValueError", "min_new_tokens must be in (0, max_new_tokens(4)], got 5."),
            Some(("invalid_value", "min_tokens".into()))
        );
        assert_eq!(
            k("TypeError", "Unexpected keyword argument 'choice'"),
            Some(("unsupported", "structured_outputs.choice".into()))
        );
        assert_eq!(
            k("ValueError", "Only one of regex, json_schema, or ebnf can be set."),
            Some(("conflict", "structured_outputs.json,structured_outputs.regex".into()))
        );
        assert_eq!(
            k("ValueError", "The input (64 tokens) exceeds the engine's maximum input length (63 tokens)."),
            Some(("too_long", "prompt_token_ids".into()))
        );
        assert_eq!(
            k("ValueError", "logprobs were requested but the server was started without enable_output_logprobs"),
            Some(("unsupported", "logprobs".into()))
        );
        assert_eq!(k("ValueError", "Something else."), None);
    }

    fn json_str(s: String) -> Json {
        Json::String(s)
    }
}
