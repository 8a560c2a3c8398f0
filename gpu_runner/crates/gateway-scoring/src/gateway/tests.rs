//! Gateway mode on made-up observations: the scenarios of golden/gateway
//! judged on what vLLM's frontend answered (pass) and on what broken
//! gateways do (fail).

use std::path::PathBuf;
use std::time::Duration;

use engine_protocol::translate::GatewayTokenizer;
use engine_protocol::{ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

use std::sync::Arc;

use super::checks::{check_logprob_tokens, check_logprobs, check_structured};
use super::*;
use crate::http;
use engine_client::transport::handshake;

fn tokenizer() -> GatewayTokenizer {
    engine_testkit::model::tokenizer(&repo().join("golden/tiny")).unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

/// A scenario of golden/gateway as the lane loads it.
fn load(name: &str) -> GwScenario {
    let text = std::fs::read_to_string(repo().join(format!("golden/gateway/{name}.json"))).unwrap();
    parse_scenario(&serde_json::from_str(&text).unwrap(), &repo().join("golden"), &tokenizer()).unwrap()
}

fn request<'a>(s: &'a GwScenario, id: &str) -> &'a GwRequest {
    s.requests().find(|r| r.id == id).unwrap()
}

/// The checks of `req` on `obs`: the names of those that failed.
fn failing(req: &GwRequest, obs: &Observed) -> Vec<String> {
    let tok = tokenizer();
    let reg = registration_from_case(&repo().join(READY_RESPONSE_CASE)).unwrap();
    let facts = handshake::decode_registration(release(), 0, &reg).unwrap();
    let ctx = CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
    check_request(req, obs, &ctx).into_iter().filter(|c| !c.ok).map(|c| c.check).collect()
}

fn add(id: &str, prompt: &[i64]) -> (String, StructValue) {
    let mut a = StructValue::with_defaults(release().engine_core_request.as_struct().unwrap());
    a.set("request_id", Value::Str(id.into())).set("prompt_token_ids", Value::IntArray(prompt.to_vec()));
    (id.to_string(), a)
}

fn answered(status: u16, body: Json, seconds: f64) -> Observed {
    Observed { status: Some(status), body: Some(body), seconds, ..Default::default() }
}

/// What the client reports after waiting out its timeout.
fn gave_up_after(s: f64) -> NoResponse {
    NoResponse::Http(http::HttpError::Timeout {
        method: "POST".into(),
        path: "/v1/completions".into(),
        timeout: Duration::from_secs_f64(s),
        received: 0,
    })
}

fn vllm_500() -> Json {
    json!({"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}})
}

#[test]
fn an_engine_error_finish_must_reach_the_client_as_an_error() {
    let s = load("engine_error_finish");
    let once = |mut o: Observed| {
        o.adds.push(add("c-1", &[92, 225, 93, 225, 94]));
        o
    };
    for id in ["completions", "chat"] {
        let r = request(&s, id);
        assert_eq!(failing(r, &once(answered(500, vllm_500(), 0.1))), Vec::<String>::new(), "{id}");
        // A fake success with the text so far.
        let ok = json!({"choices": [{"text": "x", "finish_reason": "stop"}]});
        assert_eq!(failing(r, &once(answered(200, ok, 0.1))), vec!["error_response"], "{id}");
        // Waiting out the client's timeout.
        let hang = Observed { error: Some(gave_up_after(20.0)), seconds: 20.0, ..Default::default() };
        assert_eq!(failing(r, &once(hang)), vec!["response", "error_response", "within_s"], "{id}");
        // Retrying the failed request on the engine.
        let mut retried = once(answered(500, vllm_500(), 0.4));
        retried.adds.push(add("c-2", &[92, 225, 93, 225, 94]));
        assert_eq!(failing(r, &retried), vec!["num_adds"], "{id}");
    }
    // A stream: HTTP 200, the error as an event, then [DONE].
    let r = request(&s, "stream");
    let data: Vec<String> =
        [r#"{"choices":[{"text":" c"}]}"#, &vllm_500().to_string(), "[DONE]"].iter().map(|x| x.to_string()).collect();
    let mut obs = once(answered(200, assemble_stream(Endpoint::Completions, &data), 0.02));
    obs.sse = Some(data.clone());
    assert!(failing(r, &obs).is_empty());
    let clean: Vec<String> = vec![data[0].clone(), "[DONE]".into()];
    obs.body = Some(assemble_stream(Endpoint::Completions, &clean));
    obs.sse = Some(clean);
    assert_eq!(failing(r, &obs), vec!["error_response"]);
}

#[test]
fn a_dead_engine_must_fail_the_request_promptly_not_hang_nor_succeed() {
    let s = load("engine_death_sentinel");
    assert!(s.fresh_gateway);
    let r = request(&s, "inflight");
    assert!(failing(r, &answered(500, vllm_500(), 0.3)).is_empty());
    let hang = Observed { error: Some(gave_up_after(20.0)), seconds: 20.0, ..Default::default() };
    assert_eq!(failing(r, &hang), vec!["error_response", "fails_within"]);
    let fake = answered(200, json!({"choices": [{"text": "ab", "finish_reason": "length"}]}), 0.3);
    assert_eq!(failing(r, &fake), vec!["error_response", "fails_within"]);
    // Later: a refused connection is a prompt failure; a success is not.
    let later = request(&s, "later");
    let refused = Observed {
        error: Some(NoResponse::Http(http::HttpError::Connect {
            addr: "127.0.0.1:1".into(),
            source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        })),
        seconds: 0.01,
        ..Default::default()
    };
    assert!(failing(later, &refused).is_empty());
    assert_eq!(failing(later, &answered(200, json!({}), 0.1)), vec!["fails_within"]);
}

#[test]
fn a_silent_engine_needs_a_timeout_error_and_an_abort() {
    let s = load("engine_silence");
    assert_eq!(s.smg_args, vec!["--request-timeout-secs", "3"]);
    let r = request(&s, "r");
    let mut obs = answered(504, json!({"error": {"message": "request timed out"}}), 3.1);
    obs.adds.push(add("cmpl-1", &[92, 225, 93, 225, 94]));
    assert_eq!(failing(r, &obs), vec!["engine_aborted"]);
    obs.aborts.push(("cmpl-1".into(), 0.01));
    assert!(failing(r, &obs).is_empty());
    obs.seconds = 8.0;
    assert_eq!(failing(r, &obs), vec!["within_s"]);
}

#[test]
fn a_from_golden_name_that_leaves_the_golden_tree_is_refused_before_any_file_is_read() {
    // Found writing the `scenario_file` fuzz target (gpu_runner/fuzz): the
    // name was joined to the golden tree as it came and the file read
    // whole, so a scenario could read any `*.json` on the machine, of any
    // size, through `..` or an absolute path.
    for name in ["../../../etc/x", "/etc/x", "vllm/../../x", "vllm//x", "vllm/0.32.0/stop/", "a\\b"] {
        let v = json!({"scenario": "x", "requests": [{"from_golden": name}]});
        let e = parse_scenario(&v, &repo().join("golden"), &tokenizer()).unwrap_err();
        assert!(
            matches!(
                &e,
                scenario_checks::load::ScenarioError::Refused {
                    error: process_sandbox::untrusted::Refused::Name { .. },
                    ..
                }
            ),
            "{name:?}: {e}"
        );
        assert!(e.to_string().starts_with(&format!("requests[0]: from_golden {name:?}")), "{e}");
    }
}

#[test]
fn a_from_golden_case_nested_too_deep_is_refused_with_its_limit() {
    let d = tempfile::tempdir().unwrap();
    let deep = format!("{{\"kind\": {}1{}}}", "[".repeat(65), "]".repeat(65));
    std::fs::write(d.path().join("deep.json"), deep).unwrap();
    let v = json!({"scenario": "x", "requests": [{"from_golden": "deep"}]});
    let e = parse_scenario(&v, d.path(), &tokenizer()).unwrap_err();
    assert!(
        matches!(
            &e,
            scenario_checks::load::ScenarioError::Refused {
                error: process_sandbox::untrusted::Refused::TooDeep { limit: 64, .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn smg_args_need_a_gateway_of_their_own() {
    let v = json!({"scenario": "x", "smg_args": ["--a"], "requests": [{"body": {"prompt": "a"}}]});
    let e = parse_scenario(&v, &repo().join("golden"), &tokenizer()).unwrap_err();
    assert!(e.to_string().contains("fresh_gateway"), "{e}");
}

#[test]
fn prompt_logprobs_are_checked_entry_by_entry_against_vllms_rendering() {
    let s = load("prompt_logprobs");
    let r = request(&s, "r");
    assert_eq!(r.body["prompt"], "x y z");
    assert_eq!(r.body["prompt_logprobs"], 1);
    let want = r
        .checks
        .iter()
        .find_map(|c| match &c.check {
            scenario_checks::check::ScenarioCheck::Json { is, .. } => Some(is.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(want[0], Json::Null);
    assert_eq!(want.as_array().unwrap().len(), 5);
    assert_eq!(want[1]["225"]["rank"], 25);
    let body = |p: Json| json!({"choices": [{"text": "", "finish_reason": "length", "prompt_logprobs": p}]});
    let mut obs = answered(200, body(want.clone()), 0.1);
    obs.adds.push(add("c", &[92, 225, 93, 225, 94]));
    // `sent prompt_logprobs` fails: the ADD built here has none.
    assert_eq!(failing(r, &obs), vec!["sent prompt_logprobs"]);
    let mut tampered = want.clone();
    tampered[4]["94"]["logprob"] = json!(-0.3332);
    obs.body = Some(body(tampered));
    assert_eq!(failing(r, &obs), vec!["json choices.0.prompt_logprobs", "sent prompt_logprobs"]);
    let mut no_null = want;
    no_null[0] = json!({});
    obs.body = Some(body(no_null));
    assert!(failing(r, &obs).contains(&"json choices.0.prompt_logprobs".to_string()));
}

#[test]
fn a_stream_is_put_together_before_the_body_checks() {
    let data: Vec<String> = [
        r#"{"choices":[{"index":0,"text":"The quick ","finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"text":"","finish_reason":"stop","stop_reason":"brown fox"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":11}}"#,
        "[DONE]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let b = assemble_stream(Endpoint::Completions, &data);
    assert_eq!(b["choices"][0]["text"], "The quick ");
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
    assert_eq!(b["choices"][0]["stop_reason"], "brown fox");
    assert_eq!(b["usage"]["completion_tokens"], 11);
    assert_eq!(b["_sse"]["done"], 1);
    let chat = vec![
        r#"{"choices":[{"delta":{"role":"assistant","content":"a"}}]}"#.to_string(),
        r#"{"error":{"message":"x"}}"#.to_string(),
    ];
    let c = assemble_stream(Endpoint::Chat, &chat);
    assert_eq!(c["choices"][0]["message"]["content"], "a");
    assert_eq!(c["error"]["message"], "x");
    assert_eq!(c["_sse"]["done_last"], false);
    // The scenario's checks: right text and one [DONE] last, or not.
    let s = load("stream_stop_string");
    let r = request(&s, "completions");
    assert_eq!(r.body["stream"], true);
    let mut obs = answered(200, b.clone(), 0.2);
    obs.sse = Some(data.clone());
    let f = failing(r, &obs);
    assert!(!f.contains(&"sse_done".to_string()) && !f.contains(&"finish_reason".to_string()), "{f:?}");
    let mut cut = data;
    cut.pop();
    obs.body = Some(assemble_stream(Endpoint::Completions, &cut));
    obs.sse = Some(cut);
    assert!(failing(r, &obs).contains(&"sse_done".to_string()));
}

#[test]
fn json_paths_index_objects_and_arrays_and_compare_floats_closely() {
    let v = json!({"choices": [{"a": [1, {"b": -0.33318373560905457}]}]});
    assert_eq!(json_at(&v, "choices.0.a.0"), Some(&json!(1)));
    assert_eq!(json_at(&v, "choices.1"), None);
    assert!(json_close(json_at(&v, "choices.0.a.1.b").unwrap(), &json!(-0.3331837356090546)));
    assert!(!json_close(&json!(-0.3331), &json!(-0.3332)));
    assert!(!json_close(&json!({"a": null}), &json!({})));
}

#[test]
fn json_eq_compares_numbers_by_value() {
    assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
    assert!(!json_eq(&json!([1]), &json!([1, 2])));
    assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
}

#[test]
fn structured_outputs_need_one_constraint_and_a_backend() {
    let want = json!({"json": {"type": "object"}, "_backend": "xgrammar"});
    assert!(check_structured(&json!({"json": {"type": "object"}, "_backend": "guidance"}), &want).0);
    assert!(check_structured(&json!({"json": "{\"type\": \"object\"}", "_backend": "guidance"}), &want).0);
    let (ok, d) = check_structured(&json!({"json": {"type": "object"}}), &want);
    assert!(!ok && d.contains("_backend"), "{d}");
    let (ok, d) = check_structured(&json!({"json": {"type": "object"}, "regex": "a", "_backend": "x"}), &want);
    assert!(!ok && d.contains("exactly one"), "{d}");
    assert!(!check_structured(&Json::Null, &want).0);
}

#[test]
fn completions_logprobs_follow_vllms_rendering() {
    // Sampled token outside the top 2: k + 1 entries; k = 1 keeps two.
    let sample = json!([[
        {"token_id": 9, "logprob": -3.0, "rank": 4, "decoded_token": "x"},
        {"token_id": 5, "logprob": -0.5, "rank": 1, "decoded_token": "a"},
        {"token_id": 6, "logprob": -0.9, "rank": 2, "decoded_token": "b"}
    ]]);
    let body = json!({"choices": [{"logprobs": {"tokens": ["x"], "token_logprobs": [-3.0],
        "top_logprobs": [{"x": -3.0, "a": -0.5}]}}]});
    assert!(check_logprobs(Endpoint::Completions, &body, &sample, 1).0);
    let (ok, d) = check_logprobs(Endpoint::Completions, &body, &sample, 2);
    assert!(!ok && d.contains("position 0"), "{d}");
    let chat = json!({"choices": [{"logprobs": {"content": [{"token": "x", "logprob": -3.0,
        "top_logprobs": [{"token": "x", "logprob": -3.0}]}]}}]});
    assert!(check_logprobs(Endpoint::Chat, &chat, &sample, 1).0);
    assert!(check_logprob_tokens(&chat, &sample, 1).0);
    // Greedy: the sampled token is the top one; a gateway that repeats
    // it loses a candidate.
    let greedy = json!([[
        {"token_id": 5, "logprob": -0.5, "rank": 1, "decoded_token": "a"},
        {"token_id": 6, "logprob": -0.9, "rank": 2, "decoded_token": "b"}
    ]]);
    let dup = json!({"choices": [{"logprobs": {"content": [{"token": "a", "logprob": -0.5,
        "top_logprobs": [{"token": "a", "logprob": -0.5}, {"token": "a", "logprob": -0.5}]}]}}]});
    let (ok, d) = check_logprobs(Endpoint::Chat, &dup, &greedy, 2);
    assert!(!ok && d.contains("[-0.5, -0.5]"), "{d}");
}

/// The ADD vLLM's frontend sends for the `vllm` request on prompt
/// `[1, 5, 6]`, with a `_backend` when it has a constraint.
fn vllms_add(vllm: &Json) -> (String, StructValue) {
    use engine_protocol::translate::{translate, EngineInfo, GenerateRequest, TranslateOptions};
    let mut v = vllm.clone();
    v["prompt_token_ids"] = json!([1, 5, 6]);
    let g = GenerateRequest::from_json(&v).unwrap();
    let info = EngineInfo { max_model_len: 512, release: release() };
    let t = translate(&g, &info, &tokenizer(), &TranslateOptions::vllm_parity()).unwrap();
    let mut value = t.requests[0].request.clone();
    if vllm.get("structured_outputs").is_some() {
        scenario_checks::scenario::set_path(
            &mut value,
            "sampling_params.structured_outputs._backend",
            &json!("xgrammar"),
        )
        .unwrap();
    }
    let Value::Struct(s) = value else { panic!("not a struct") };
    (t.requests[0].request_id.clone(), s)
}

fn set_sent(obs: &mut Observed, path: &str, v: Json) {
    let mut value = Value::Struct(obs.adds[0].1.clone());
    scenario_checks::scenario::set_path(&mut value, path, &v).unwrap();
    let Value::Struct(s) = value else { panic!() };
    obs.adds[0].1 = s;
}

const VLLM: &str = r#"{"max_tokens": 3, "temperature": 0.0, "seed": 5, "stop_token_ids": [77],
                       "structured_outputs": {"regex": "[a-c]+"}}"#;

/// What a right gateway answered, both sides.
fn right_answer() -> Observed {
    let body = json!({
        "choices": [{"text": "abc", "finish_reason": "length", "stop_reason": "x",
                     "logprobs": {"token_logprobs": [-0.5], "top_logprobs": [{"a": -0.5}],
                                  "content": [{"token": "a", "logprob": -0.5, "top_logprobs": [{"token": "a", "logprob": -0.5}]}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3},
        "_sse": {"events": 2, "done": 1, "done_last": true},
    });
    let mut obs = answered(200, body, 0.1);
    obs.sse = Some(vec!["{}".into(), "[DONE]".into()]);
    let add = vllms_add(&serde_json::from_str(VLLM).unwrap());
    obs.aborts.push((add.0.clone(), 0.01));
    obs.adds.push(add);
    obs
}

/// What a right gateway answered for a request the engine ran to its end.
fn right_finished() -> Observed {
    let mut obs = right_answer();
    obs.aborts.clear();
    obs.engine_finished.push((obs.adds[0].0.clone(), 3));
    obs
}

/// What a right gateway answered when the engine failed.
fn right_error() -> Observed {
    answered(500, vllm_500(), 0.2)
}

type GwBreaker = fn(&mut Observed);

/// A check's entry, the right observation, and what breaks it.
type GwCase = (Json, fn() -> Observed, GwBreaker);

fn sample() -> Json {
    json!([[{"token_id": 5, "logprob": -0.5, "rank": 1, "decoded_token": "a"}]])
}

/// Every gateway check: its entry, the right observation, what breaks it.
fn gateway_cases() -> Vec<GwCase> {
    vec![
        (json!({"check": "status", "is": 200}), right_answer, |o| o.status = Some(500)),
        (json!({"check": "finish_reason", "is": "length"}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["finish_reason"] = json!("stop")
        }),
        (json!({"check": "stop_reason", "is": "x"}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["stop_reason"] = Json::Null
        }),
        (json!({"check": "text", "is": "abc"}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["text"] = json!("abd")
        }),
        (json!({"check": "completion_tokens", "is": 3}), right_answer, |o| {
            o.body.as_mut().unwrap()["usage"]["completion_tokens"] = json!(4)
        }),
        (json!({"check": "prompt_tokens"}), right_answer, |o| {
            o.body.as_mut().unwrap()["usage"]["prompt_tokens"] = json!(2)
        }),
        (json!({"check": "logprobs", "k": 1, "sample": sample()}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["logprobs"]["top_logprobs"][0]["a"] = json!(-0.7)
        }),
        (json!({"check": "logprob_tokens", "k": 1, "sample": sample()}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["logprobs"]["content"][0]["token"] = json!("\u{fffd}")
        }),
        (json!({"check": "sent", "field": "max_tokens"}), right_answer, |o| {
            set_sent(o, "sampling_params.max_tokens", json!(16))
        }),
        (json!({"check": "sent", "field": "temperature", "is": 0.0}), right_answer, |o| {
            set_sent(o, "sampling_params.temperature", json!(1.0))
        }),
        (json!({"check": "sent_stop_token_ids"}), right_answer, |o| {
            set_sent(o, "sampling_params.stop_token_ids", json!([77, 99]))
        }),
        (json!({"check": "sent_structured_outputs"}), right_answer, |o| {
            set_sent(o, "sampling_params.structured_outputs._backend", Json::Null)
        }),
        (json!({"check": "sent_seeds"}), right_answer, |o| set_sent(o, "sampling_params.seed", json!(6))),
        (json!({"check": "num_adds", "is": 1}), right_answer, |o| {
            let again = o.adds[0].clone();
            o.adds.push(again)
        }),
        (json!({"check": "engine_aborted"}), right_answer, |o| o.aborts.clear()),
        (json!({"check": "engine_finished"}), right_finished, |o| {
            let id = o.adds[0].0.clone();
            o.aborts.push((id, 0.5))
        }),
        (json!({"check": "serves_or_exits"}), right_answer, |o| {
            o.status = Some(500);
            o.body = Some(vllm_500());
        }),
        (json!({"check": "within_s", "s": 5}), right_answer, |o| o.seconds = 9.0),
        (json!({"check": "json", "path": "choices.0.text", "is": "abc"}), right_answer, |o| {
            o.body.as_mut().unwrap()["choices"][0]["text"] = json!("ab")
        }),
        (json!({"check": "sse_done"}), right_answer, |o| o.sse = None),
        (json!({"check": "error_response", "status": 500}), right_error, |o| o.body = Some(json!({"detail": "x"}))),
        (json!({"check": "fails_within", "s": 6}), right_error, |o| {
            o.status = Some(200);
            o.body = Some(json!({"choices": []}));
        }),
    ]
}

#[test]
fn every_gateway_check_passes_on_vllms_answer_and_fails_on_a_wrong_one() {
    let tok = tokenizer();
    let reg = registration_from_case(&repo().join(READY_RESPONSE_CASE)).unwrap();
    let facts = handshake::decode_registration(release(), 0, &reg).unwrap();
    let ctx = CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
    let vllm: Json = serde_json::from_str(VLLM).unwrap();
    for (entry, right, breaker) in gateway_cases() {
        let s = parse_scenario(
            &json!({"scenario": "t", "requests": [{"id": "r", "body": {"prompt": "a b", "max_tokens": 3},
                                                   "vllm": vllm, "checks": [entry]}]}),
            &repo().join("golden"),
            &tok,
        )
        .unwrap_or_else(|e| panic!("{entry}: {e}"));
        let req = s.requests().next().unwrap();
        let name = req.checks[0].name();
        let judged = |obs: &Observed| {
            let rs = check_request(req, obs, &ctx);
            let mine: Vec<CheckResult> = rs.into_iter().filter(|c| c.check.starts_with(name)).collect();
            assert_eq!(mine.len(), 1, "{entry}: {mine:?}");
            mine.into_iter().next().unwrap()
        };
        let good = right();
        let r = judged(&good);
        assert!(r.ok && r.failure.is_none(), "{entry} on the right answer: {}", r.detail);
        let mut bad = right();
        breaker(&mut bad);
        let r = judged(&bad);
        assert!(!r.ok, "{entry} on the broken answer: {}", r.detail);
        // The failure is typed: what differed, expected and got, for the
        // checks that compare one value.
        let failure = r.failure.unwrap_or_else(|| panic!("{entry}: no typed failure"));
        if ["status", "finish_reason", "stop_reason", "text", "completion_tokens", "prompt_tokens", "json", "num_adds"]
            .contains(&name)
        {
            assert!(matches!(failure, scenario_checks::check::CheckFailure::Differs { .. }), "{entry}: {failure:?}");
        }
    }
}

/// `sent_stop_token_ids` on a request with `extra` in both the body and
/// vLLM's parameters, the gateway's ADD being vLLM's with `more` stop ids
/// and the fields `sets` set.
fn judge_stop_ids(extra: Json, more: impl Fn(&GatewayTokenizer) -> Vec<i64>, sets: &[(&str, Json)]) -> CheckResult {
    let tok = tokenizer();
    let reg = registration_from_case(&repo().join(READY_RESPONSE_CASE)).unwrap();
    let facts = handshake::decode_registration(release(), 0, &reg).unwrap();
    let ctx = CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
    let mut body = json!({"prompt": "a b", "max_tokens": 3});
    let mut vllm = json!({"max_tokens": 3});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
        vllm[k] = v.clone();
    }
    let s = parse_scenario(
        &json!({"scenario": "t", "requests": [{"id": "r", "body": body, "vllm": vllm,
                                               "checks": [{"check": "sent_stop_token_ids"}]}]}),
        &repo().join("golden"),
        &tok,
    )
    .unwrap();
    let req = s.requests().next().unwrap();
    let mut obs = answered(200, json!({"choices": [{"text": "", "finish_reason": "stop"}]}), 0.1);
    obs.adds.push(vllms_add(&vllm));
    // vLLM's own stop ids for the request (the generation config's extra
    // EOS ids unless ignore_eos), then the gateway's extra ones.
    let ignore_eos = extra.get("ignore_eos") == Some(&json!(true));
    let mut ids = tok.eos(ignore_eos).stop_ids(&[]).stop_token_ids;
    ids.extend(more(&tok));
    set_sent(&mut obs, "sampling_params.stop_token_ids", json!(ids));
    for (path, v) in sets {
        set_sent(&mut obs, path, v.clone());
    }
    check_request(req, &obs, &ctx).into_iter().find(|c| c.check == "sent_stop_token_ids").unwrap()
}

fn period_id(tok: &GatewayTokenizer) -> Vec<i64> {
    let ids = tok.encode(".");
    assert_eq!(ids.len(), 1, "\".\" is one token of golden/tiny");
    vec![i64::from(ids[0])]
}

#[test]
fn a_single_token_stop_string_sent_as_a_stop_token_id_is_allowed_without_min_tokens_only() {
    let plain = judge_stop_ids(json!({"stop": ["."]}), period_id, &[]);
    assert!(plain.ok, "{}", plain.detail);
    assert!(plain.detail.contains("single-token stop string \".\""), "{}", plain.detail);
    // Proven live: under min_tokens the engine masks stop ids, so the
    // tokens differ (golden/replay/equivalence_interactions.json).
    let min = judge_stop_ids(json!({"stop": ["."], "min_tokens": 2}), period_id, &[]);
    assert!(!min.ok, "{}", min.detail);
    assert!(min.detail.contains("NOT the same at the engine") && min.detail.contains("min_tokens 2"), "{}", min.detail);
}

#[test]
fn the_eos_sent_as_a_stop_token_id_is_allowed_unless_ignore_eos_is_set() {
    let eos = |tok: &GatewayTokenizer| vec![i64::from(tok.eos_token_id.unwrap())];
    let plain = judge_stop_ids(json!({}), eos, &[]);
    assert!(plain.ok, "{}", plain.detail);
    // A gateway that keeps `_eos_token_id` under ignore_eos and sends the
    // EOS as a stop id: the engine stops on it (proven live,
    // golden/replay/equivalence_interactions.json).
    let ignored = judge_stop_ids(json!({"ignore_eos": true}), eos, &[("sampling_params._eos_token_id", json!(2))]);
    assert!(!ignored.ok, "{}", ignored.detail);
    assert!(ignored.detail.contains("ignore_eos is set"), "{}", ignored.detail);
}

#[test]
fn every_gateway_check_of_the_vocabulary_has_a_case() {
    let cases = gateway_cases();
    let covered: Vec<&str> = cases.iter().map(|(e, _, _)| e["check"].as_str().unwrap_or("")).collect();
    // The checks of probes and actions have theirs in `steps`.
    let step_only = ["healthy", "exits_within", "no_socket_files"];
    for e in scenario_checks::check::VOCABULARY
        .iter()
        .filter(|e| e.kinds.contains(&scenario_checks::check::ScenarioKind::Gateway) && !step_only.contains(&e.name))
    {
        assert!(covered.contains(&e.name), "no pass/fail case for {}", e.name);
    }
}

/// A client failure as a report words it, typed again (its message is
/// the same).
fn error_from_report(e: &str) -> NoResponse {
    let number_after = |pre: &str| -> f64 {
        let rest = e.split(pre).nth(1).unwrap_or("");
        rest.split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()
            .unwrap_or("")
            .trim_end_matches('.')
            .parse()
            .unwrap()
    };
    let mut words = e.split_whitespace();
    let (method, path) =
        (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").trim_end_matches(':').to_string());
    let typed = if e.contains("no complete response within") {
        http::HttpError::Timeout {
            method,
            path,
            timeout: Duration::from_secs_f64(number_after("within ")),
            received: number_after("(") as usize,
        }
    } else if e.contains("the client closed the connection after") {
        http::HttpError::ClosedByClient {
            method,
            path,
            events: number_after("after ") as usize,
            received: number_after("(") as usize,
        }
    } else if let (Some(addr), true) = (e.strip_prefix("connect "), e.ends_with("Connection refused (os error 111)")) {
        http::HttpError::Connect {
            addr: addr.split(": ").next().unwrap().to_string(),
            source: std::sync::Arc::new(std::io::Error::from_raw_os_error(111)),
        }
    } else {
        return NoResponse::Task(e.to_string());
    };
    assert_eq!(typed.to_string(), e, "the report's error, typed again");
    NoResponse::Http(typed)
}

/// What a request of a gateway report showed, rebuilt from the report
/// (the ADDs from their canonical view).
fn observed_from_report(q: &Json) -> Observed {
    let adds = q["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let value =
                engine_protocol::view::from_view("EngineCoreRequest", release().engine_core_request, v).unwrap();
            let Value::Struct(s) = value else { panic!("not a struct") };
            (s.str_field("request_id").unwrap_or("").to_string(), s)
        })
        .collect();
    let error = q["error"].as_str().map(error_from_report);
    Observed {
        status: q["status"].as_u64().map(|s| s as u16),
        body: (!q["response"].is_null()).then(|| q["response"].clone()),
        error,
        adds,
        aborts: q["aborts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["request_id"].as_str().unwrap().to_string(), a["after_response_s"].as_f64().unwrap()))
            .collect(),
        invalid: q["invalid"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        engine_finished: q["engine_finished"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| (f["request_id"].as_str().unwrap().to_string(), f["tokens"].as_u64().unwrap() as usize))
                    .collect()
            })
            .unwrap_or_default(),
        sse: q["sse"].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()),
        seconds: q["seconds"].as_f64().unwrap(),
        gateway_exited: q["gateway_exited"].as_bool().unwrap_or(false),
        ..Observed::default()
    }
}

/// A probe or an action of a gateway report, judged again: its checks'
/// results (`None` for a request).
fn step_from_report(s: &GwScenario, q: &Json) -> Option<Vec<CheckResult>> {
    let step = s.steps.iter().find(|x| x.id() == q["id"].as_str().unwrap()).unwrap();
    match step {
        GwStep::Request(_) => None,
        GwStep::Probe(p) => {
            let o = steps::ProbeObserved {
                path: q["probe"].as_str().unwrap().to_string(),
                status: q["status"].as_u64().map(|x| x as u16),
                error: q["error"].as_str().map(error_from_report),
                body_start: q["response"].as_str().unwrap_or("").to_string(),
                seconds: q["seconds"].as_f64().unwrap(),
            };
            Some(steps::check_probe(p, &o))
        }
        GwStep::Action(a) => {
            let o = steps::ActionObserved {
                ok: q["ok"].as_bool().unwrap(),
                seconds: q["seconds"].as_f64().unwrap(),
                detail: q["detail"].as_str().unwrap().to_string(),
                socket_files: q["socket_files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().into())
                    .collect(),
                searched: Vec::new(),
            };
            Some(steps::check_action(a, &o))
        }
    }
}

#[test]
fn the_typed_checks_judge_the_reference_run_as_its_report_says() {
    let report: Json = serde_json::from_str(
        &std::fs::read_to_string(repo().join("golden/gateway/reports/vllm-0.32.0-frontend.json")).unwrap(),
    )
    .unwrap();
    let tok = tokenizer();
    let reg = registration_from_case(&repo().join(READY_RESPONSE_CASE)).unwrap();
    let facts = handshake::decode_registration(release(), 0, &reg).unwrap();
    let ctx = CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
    let mut compared = 0;
    for r in report["results"].as_array().unwrap() {
        let Some(requests) = r["requests"].as_array() else { continue };
        let s = load(r["scenario"].as_str().unwrap());
        for q in requests {
            let got = match step_from_report(&s, q) {
                Some(got) => got,
                None => check_request(request(&s, q["id"].as_str().unwrap()), &observed_from_report(q), &ctx),
            };
            let want: Vec<&Json> = r["checks"].as_array().unwrap().iter().filter(|c| c["request"] == q["id"]).collect();
            assert_eq!(got.len(), want.len(), "{}/{}: {got:?}", r["scenario"], q["id"]);
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.check, w["check"].as_str().unwrap());
                assert_eq!(g.ok, w["ok"].as_bool().unwrap(), "{}/{} {}: {}", r["scenario"], q["id"], g.check, g.detail);
                assert_eq!(g.detail, w["detail"].as_str().unwrap(), "{}/{} {}", r["scenario"], q["id"], g.check);
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "{compared}");
}

#[test]
fn a_stream_of_several_choices_is_put_together_per_index_whatever_the_interleaving() {
    let chunk = |i: u64, t: &str| json!({"choices": [{"index": i, "delta": {"content": t}}]}).to_string();
    let one: Vec<String> = vec![chunk(0, "a"), chunk(1, "x"), chunk(0, "b"), chunk(1, "y")];
    let other: Vec<String> = vec![chunk(1, "x"), chunk(1, "y"), chunk(0, "a"), chunk(0, "b")];
    let (p, q) = (assemble_stream(Endpoint::Chat, &one), assemble_stream(Endpoint::Chat, &other));
    assert_eq!(p["choices"], q["choices"]);
    assert_eq!(p["choices"][0]["message"]["content"], "ab");
    assert_eq!(p["choices"][1]["message"]["content"], "xy");
    assert_eq!(p["choices"][1]["index"], 1);
}

#[test]
fn lifecycle_steps_are_read_and_misplaced_ones_refused_at_load() {
    let tok = tokenizer();
    let parse = |v: Json| parse_scenario(&v, &repo().join("golden"), &tok).map_err(|e| e.to_string());
    let s = load("lifecycle_readiness");
    assert!(!s.engine_at_start && s.fresh_gateway);
    let kinds: Vec<&str> = s
        .steps
        .iter()
        .map(|x| match x {
            GwStep::Request(_) => "request",
            GwStep::Probe(_) => "probe",
            GwStep::Action(_) => "action",
        })
        .collect();
    assert_eq!(kinds[..4], ["probe", "probe", "action", "probe"]);
    let disconnect = load("lifecycle_client_disconnect");
    assert_eq!(request(&disconnect, "hangs_up").client.close_after_events, Some(3));

    let req = json!({"id": "r", "body": {"prompt": "a"}});
    for (v, why) in [
        (
            json!({"scenario": "t", "requests": [{"probe": "ready", "checks": [{"check": "text", "is": "a"}]}]}),
            "a probe takes the checks healthy, within_s, not text",
        ),
        (json!({"scenario": "t", "requests": [{"probe": "metrics"}]}), "unknown probe \"metrics\""),
        (
            json!({"scenario": "t", "requests": [{"probe": "ready", "until": "healthy"}]}),
            "`until` and `wait_s` go together",
        ),
        (
            json!({"scenario": "t", "requests": [req.clone(), {"action": "stop_gateway"}]}),
            "an `action` step needs `fresh_gateway: true`",
        ),
        (
            json!({"scenario": "t", "fresh_gateway": true, "requests": [{"action": "stop_gateway", "checks": [{"check": "healthy", "is": true}]}]}),
            "this action takes the checks exits_within, no_socket_files, not healthy",
        ),
        (
            json!({"scenario": "t", "fresh_gateway": true, "engine_at_start": false, "requests": [req.clone()]}),
            "`engine_at_start: false` needs a `register_engine` step",
        ),
        (
            json!({"scenario": "t", "engine_at_start": false, "requests": [req.clone()]}),
            "`engine_at_start: false` needs `fresh_gateway: true`",
        ),
        (
            json!({"scenario": "t", "requests": [{"body": {"prompt": "a"}, "checks": [{"check": "no_socket_files"}]}]}),
            "no_socket_files is a check of a probe or an action, not of a request",
        ),
        (
            json!({"scenario": "t", "requests": [{"body": {"prompt": "a"}, "client": {"hang_up": 3}}]}),
            "`client`: unknown field \"hang_up\"",
        ),
    ] {
        let e = parse(v.clone()).unwrap_err();
        assert!(e.contains(why), "{v}: {e}");
    }
}
