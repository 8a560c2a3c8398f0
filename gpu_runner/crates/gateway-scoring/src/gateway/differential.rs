//! The differential: the same generated requests sent to a reference
//! gateway (vLLM's own frontend) and to the gateway under test, each with
//! the suite's mock engine behind it, compared field by field.
//!
//! The request space comes from vLLM's definitions
//! ([`super::request_space`]): a sweep sets every field of the request
//! model alone on a base request, with each value its type and bounds
//! give, on both endpoints, streamed and not. The mock engine generates
//! from the prompt (the same tokens on both sides, `mock::vllm`), so what
//! differs is the gateways' doing.
//!
//! Compared: the HTTP status; on success every field of every ADD the
//! engine read (the `EngineCoreRequest` as the canonical view renders it)
//! and the response body; the number of ADDs and ABORTs. Volatile fields
//! are normalised by rule ([`VOLATILE_SENT`], [`VOLATILE_RESPONSE`]), an
//! error response's message is not compared (only that both refused), and
//! numbers are compared as the `f32` the engine sent (logprobs are `f32`
//! tensors on the wire: `-0.1` and `-0.10000000149011612` are one value
//! printed two ways). A probe's differences are those its field makes:
//! what already differs on the base request alone is reported once, as the
//! base request's ([`subtract_base`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value as Json};

use super::lifecycle::{run_request, Session};
use super::request_space::{RequestModel, RequestSpace, Row};
use super::scenario::{Endpoint, GwRequest};
use super::Observed;

/// `EngineCoreRequest` fields that differ from request to request on any
/// gateway: ids (`external_req_id`, vLLM 0.33.0) and arrival times.
pub const VOLATILE_SENT: &[&str] = &["request_id", "external_req_id", "arrival_time"];

/// Response fields that differ from request to request on any gateway.
pub const VOLATILE_RESPONSE: &[&str] = &["id", "created", "system_fingerprint", "model"];

/// The number of SSE events of a stream: it depends on how the engine's
/// outputs fall in time (the mock steps every few ms), not on the request;
/// the assembled text, the `[DONE]` terminator and its place are compared.
pub const VOLATILE_STREAM: &[&str] = &["events"];

/// Fields a sweep does not set alone, with why (the base request sets
/// them, or setting them changes what is compared rather than the
/// request).
pub const NOT_SWEPT: &[(&str, &str)] = &[
    ("model", "the base request names the served model"),
    ("prompt", "the base request's prompt"),
    ("messages", "the base request's messages"),
    ("stream", "every probe runs streamed and not"),
    ("request_id", "a client-chosen id only renames the request"),
];

/// One generated request.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffProbe {
    pub endpoint: Endpoint,
    pub stream: bool,
    /// The field set on the base request (`None`: the base request alone).
    pub field: Option<String>,
    pub value: Json,
    pub body: Json,
}

/// How one probe came out.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeVerdict {
    /// Both answered alike.
    Same,
    /// Both refused it (any error status).
    BothRefused,
    /// The gateway under test refused what the reference served (its
    /// status).
    Refused(u16),
    /// They differ at these paths.
    Differs(Vec<Difference>),
}

/// One path where the two sides differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// `status`, `adds`, `aborts`, `sent[i].<path>` or `response.<path>`.
    pub path: String,
    pub reference: Json,
    pub test: Json,
}

/// A probe with its verdict.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    pub probe: DiffProbe,
    pub verdict: ProbeVerdict,
}

/// The base request of an endpoint: a short request of a few tokens,
/// which every field's probe extends. Not greedy: vLLM's `SamplingParams`
/// resets `top_p`, `top_k` and `min_p` under temperature 0
/// (`vllm/sampling_params.py`), which would hide what a gateway does with
/// them; the mock engine's tokens do not depend on sampling.
pub fn base_request(endpoint: Endpoint, stream: bool) -> Json {
    let mut b = match endpoint {
        Endpoint::Completions => json!({"prompt": "Hello there", "max_tokens": 4}),
        Endpoint::Chat => json!({"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 4}),
    };
    if stream {
        b["stream"] = json!(true);
    }
    b
}

fn endpoint_of(model: &RequestModel) -> Option<Endpoint> {
    [Endpoint::Completions, Endpoint::Chat].into_iter().find(|e| e.path() == model.endpoint)
}

/// The sweep over `space`: for each endpoint in `endpoints` and each of
/// `streams`, the base request alone, then every field alone with each of
/// its values. Fields left out come back with why ([`NOT_SWEPT`], or no
/// value can be made).
pub fn sweep(
    space: &RequestSpace,
    endpoints: &[Endpoint],
    streams: &[bool],
) -> (Vec<DiffProbe>, Vec<(String, String)>) {
    let mut probes = Vec::new();
    let mut left_out = Vec::new();
    for model in &space.models {
        let Some(ep) = endpoint_of(model).filter(|e| endpoints.contains(e)) else { continue };
        for &stream in streams {
            probes.push(DiffProbe {
                endpoint: ep,
                stream,
                field: None,
                value: Json::Null,
                body: base_request(ep, stream),
            });
        }
        for (name, row) in model.rows() {
            let at = format!("{} {name}", model.endpoint);
            if let Some((_, why)) = NOT_SWEPT.iter().find(|(f, _)| *f == name) {
                left_out.push((at, (*why).to_string()));
                continue;
            }
            let values = match row {
                Row::Values(v) => v,
                Row::NoValues(why) => {
                    left_out.push((at, why));
                    continue;
                }
            };
            for &stream in streams {
                for v in &values {
                    let mut body = base_request(ep, stream);
                    body[name.as_str()] = v.clone();
                    probes.push(DiffProbe { endpoint: ep, stream, field: Some(name.clone()), value: v.clone(), body });
                }
            }
        }
    }
    (probes, left_out)
}

/// Every `take`-th field probe from `offset` (a fixed sample for CI),
/// and every base probe: a field probe's findings are what it adds to its
/// base request's.
pub fn sample(probes: Vec<DiffProbe>, take: usize, offset: usize) -> Vec<DiffProbe> {
    let take = take.max(1);
    probes
        .into_iter()
        .enumerate()
        .filter(|(i, p)| p.field.is_none() || i % take == offset % take)
        .map(|(_, p)| p)
        .collect()
}

/// A probe as a request of the gateway runner, answered within `timeout`.
pub(crate) fn request_of(endpoint: Endpoint, body: &Json, grace: Duration, timeout: Duration) -> GwRequest {
    GwRequest {
        client: Default::default(),
        id: "probe".into(),
        endpoint,
        body: body.clone(),
        vllm: json!({}),
        prompt_text: None,
        engine: None,
        golden: None,
        grace,
        timeout,
        checks: Vec::new(),
    }
}

/// Sends every probe to both sides, one after another, and compares;
/// after each response the engine's input is read for `grace` more (late
/// ABORTs).
pub async fn run(
    reference: &Session,
    test: &Session,
    probes: &[DiffProbe],
    model: &str,
    grace: Duration,
) -> Vec<ProbeResult> {
    let mut out = Vec::with_capacity(probes.len());
    for p in probes {
        let verdict = send_both(reference, test, p.endpoint, &p.body, model, grace).await;
        out.push(ProbeResult { probe: p.clone(), verdict });
    }
    subtract_base(&mut out);
    out
}

/// Sends one request body to both sides and compares what they did; each
/// side's ADDs are read with the release its own mock plays (two frontends
/// of different releases are compared, each on an engine of its own).
pub async fn send_both(
    reference: &Session,
    test: &Session,
    endpoint: Endpoint,
    body: &Json,
    model: &str,
    grace: Duration,
) -> ProbeVerdict {
    let req = request_of(endpoint, body, grace, Duration::from_secs(20));
    let a = run_request(reference, &req, model, reference.release()).await;
    let b = run_request(test, &req, model, test.release()).await;
    compare(&a, &b)
}

/// `v` without the differences in `known` (the base request's).
pub fn without(v: ProbeVerdict, known: &[Difference]) -> ProbeVerdict {
    match v {
        ProbeVerdict::Differs(mut d) => {
            d.retain(|x| !known.contains(x));
            if d.is_empty() {
                ProbeVerdict::Same
            } else {
                ProbeVerdict::Differs(d)
            }
        }
        v => v,
    }
}

fn ok(o: &Observed) -> bool {
    o.status.is_some_and(|s| (200..300).contains(&s))
}

/// What differs between the reference's observation `a` and the test's
/// `b`.
pub fn compare(a: &Observed, b: &Observed) -> ProbeVerdict {
    match (ok(a), ok(b)) {
        (false, false) => return ProbeVerdict::BothRefused,
        (true, false) => return ProbeVerdict::Refused(b.status.unwrap_or(0)),
        (false, true) => {
            return ProbeVerdict::Differs(vec![Difference {
                path: "status".into(),
                reference: json!(a.status),
                test: json!(b.status),
            }])
        }
        (true, true) => {}
    }
    let mut d = Vec::new();
    if a.adds.len() != b.adds.len() {
        d.push(Difference { path: "adds".into(), reference: json!(a.adds.len()), test: json!(b.adds.len()) });
    }
    if a.aborts.len() != b.aborts.len() {
        d.push(Difference { path: "aborts".into(), reference: json!(a.aborts.len()), test: json!(b.aborts.len()) });
    }
    for (i, ((_, x), (_, y))) in a.adds.iter().zip(&b.adds).enumerate() {
        diff(&format!("sent[{i}]"), &sent_view(x), &sent_view(y), &mut d);
    }
    let norm = |o: &Observed| {
        let mut v = o.body.clone().unwrap_or(Json::Null);
        if let Some(m) = v.as_object_mut() {
            for k in VOLATILE_RESPONSE {
                m.remove(*k);
            }
            if let Some(sse) = m.get_mut("_sse").and_then(Json::as_object_mut) {
                for k in VOLATILE_STREAM {
                    sse.remove(*k);
                }
            }
        }
        v
    };
    diff("response", &norm(a), &norm(b), &mut d);
    if d.is_empty() {
        ProbeVerdict::Same
    } else {
        ProbeVerdict::Differs(d)
    }
}

/// The leaves where `a` and `b` differ, under `at`.
fn diff(at: &str, a: &Json, b: &Json, out: &mut Vec<Difference>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let n = Json::Null;
                diff(&format!("{at}.{k}"), x.get(k).unwrap_or(&n), y.get(k).unwrap_or(&n), out);
            }
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{at}[{i}]"), p, q, out);
            }
        }
        (x, y) if x == y => {}
        (Json::Number(p), Json::Number(q)) if same_f32(p, q) => {}
        (x, y) => out.push(Difference { path: at.to_string(), reference: x.clone(), test: y.clone() }),
    }
}

/// An ADD as the differential compares it: its JSON view without the
/// [`VOLATILE_SENT`] fields, and the prompt as its ids, whichever way the
/// sender's release types it (a list, or from vLLM 0.34.0 on the int32
/// array its engine client packs, docs/wire-protocol.md §6.9): two
/// frontends of different releases that send the same prompt agree on it.
/// The wire type itself is the schema diff's to report, and each side's
/// `wire_valid` check's to judge against its own release.
fn sent_view(add: &engine_protocol::StructValue) -> Json {
    let mut v = engine_protocol::view::any_view(&engine_protocol::Value::Struct(add.clone()));
    if let Some(o) = v.as_object_mut() {
        for k in VOLATILE_SENT {
            o.remove(*k);
        }
        if let Some(ids) = add.get("prompt_token_ids").and_then(engine_protocol::Value::token_ids) {
            o.insert("prompt_token_ids".into(), json!(ids));
        }
    }
    v
}

/// Two numbers that are the same `f32`.
fn same_f32(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x as f32) == (y as f32) && (x.fract() != 0.0 || y.fract() != 0.0),
        _ => false,
    }
}

/// What the base request alone differs in, per endpoint and stream (the
/// base probes of `results`).
pub fn base_differences(results: &[ProbeResult]) -> Vec<(Endpoint, bool, Vec<Difference>)> {
    results
        .iter()
        .filter(|r| r.probe.field.is_none())
        .map(|r| {
            let d = if let ProbeVerdict::Differs(d) = &r.verdict { d.clone() } else { Vec::new() };
            (r.probe.endpoint, r.probe.stream, d)
        })
        .collect()
}

/// Removes from each probe the differences its endpoint and stream's base
/// probe already has (the same path and the same two values), so that a
/// probe shows what its field changes; a probe left with none is the
/// same.
pub fn subtract_base(results: &mut [ProbeResult]) {
    let base = base_differences(results);
    for r in results.iter_mut().filter(|r| r.probe.field.is_some()) {
        let Some((_, _, known)) = base.iter().find(|(e, s, _)| *e == r.probe.endpoint && *s == r.probe.stream) else {
            continue;
        };
        r.verdict = without(std::mem::replace(&mut r.verdict, ProbeVerdict::Same), known);
    }
}

/// One cell of the parameter matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatrixCell {
    /// Every probe of the field answered as vLLM.
    Same,
    /// Some probe refused by the gateway where vLLM served it.
    Refused,
    /// Some probe differed.
    Differs,
}

impl MatrixCell {
    pub fn name(self) -> &'static str {
        match self {
            MatrixCell::Same => "same",
            MatrixCell::Refused => "refused",
            MatrixCell::Differs => "differs",
        }
    }
}

/// The parameter matrix: field × (endpoint, stream), the worst verdict of
/// the field's probes (a probe both refused counts as the same).
pub fn matrix(results: &[ProbeResult]) -> BTreeMap<String, BTreeMap<(String, bool), MatrixCell>> {
    let mut m: BTreeMap<String, BTreeMap<(String, bool), MatrixCell>> = BTreeMap::new();
    for r in results {
        let field = r.probe.field.clone().unwrap_or_else(|| "(base request)".into());
        let cell = match r.verdict {
            ProbeVerdict::Same | ProbeVerdict::BothRefused => MatrixCell::Same,
            ProbeVerdict::Refused(_) => MatrixCell::Refused,
            ProbeVerdict::Differs(_) => MatrixCell::Differs,
        };
        let e =
            m.entry(field).or_default().entry((r.probe.endpoint.path().to_string(), r.probe.stream)).or_insert(cell);
        *e = (*e).max(cell);
    }
    m
}

/// The findings as JSON: every probe that did not come out the same, with
/// its request and what differs (both sides' values).
pub fn report_json(reference: &str, test: &str, results: &[ProbeResult], left_out: &[(String, String)]) -> Json {
    let findings: Vec<Json> = results
        .iter()
        .filter(|r| !matches!(r.verdict, ProbeVerdict::Same | ProbeVerdict::BothRefused))
        .map(|r| {
            let mut f = json!({
                "endpoint": r.probe.endpoint.path(),
                "stream": r.probe.stream,
                "field": r.probe.field,
                "value": r.probe.value,
                "request": r.probe.body,
            });
            match &r.verdict {
                ProbeVerdict::Refused(s) => f["refused"] = json!(s),
                ProbeVerdict::Differs(d) => {
                    f["differences"] =
                        d.iter().map(|x| json!({"path": x.path, "reference": x.reference, "test": x.test})).collect();
                }
                _ => {}
            }
            f
        })
        .collect();
    let m = matrix(results);
    let cells = |c: MatrixCell| m.values().flat_map(|r| r.values()).filter(|x| **x == c).count();
    let table: serde_json::Map<String, Json> = m
        .iter()
        .map(|(field, row)| {
            let r: serde_json::Map<String, Json> =
                row.iter().map(|(col, c)| (column_name(col), json!(c.name()))).collect();
            (field.clone(), Json::Object(r))
        })
        .collect();
    json!({
        "differential": true,
        "reference": reference,
        "gateway": test,
        "probes": results.len(),
        "matrix_cells": {"same": cells(MatrixCell::Same), "refused": cells(MatrixCell::Refused), "differs": cells(MatrixCell::Differs)},
        "matrix": table,
        "findings": findings,
        "left_out": left_out.iter().map(|(f, why)| json!({"field": f, "why": why})).collect::<Vec<_>>(),
    })
}

/// A matrix column's name: `completions`, `chat/completions (stream)`.
fn column_name(c: &(String, bool)) -> String {
    format!("{}{}", c.0.trim_start_matches("/v1/"), if c.1 { " (stream)" } else { "" })
}

/// The matrix as a markdown table (fields × endpoint and stream).
pub fn matrix_markdown(test: &str, results: &[ProbeResult]) -> String {
    let m = matrix(results);
    let table: BTreeMap<String, BTreeMap<String, String>> = m
        .iter()
        .map(|(f, row)| (f.clone(), row.iter().map(|(c, x)| (column_name(c), x.name().to_string())).collect()))
        .collect();
    table_markdown(test, &table)
}

/// A parameter matrix (field → column → cell) as a markdown table.
pub fn table_markdown(test: &str, m: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    let mut cols: Vec<&String> = m.values().flat_map(|r| r.keys()).collect();
    cols.sort();
    cols.dedup();
    let mut s = format!("| {test}: field | {} |\n", cols.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(" | "));
    s.push_str(&format!("| --- |{}\n", " --- |".repeat(cols.len())));
    for (field, row) in m {
        let cells: Vec<&str> = cols.iter().map(|c| row.get(*c).map_or("", String::as_str)).collect();
        s.push_str(&format!("| `{field}` | {} |\n", cells.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::request_space::committed;

    fn space() -> RequestSpace {
        committed("0.32.0")
    }

    #[test]
    fn the_sweep_sets_every_field_alone_or_says_why_not() {
        let s = space();
        let (probes, left_out) = sweep(&s, &[Endpoint::Completions, Endpoint::Chat], &[false, true]);
        for m in &s.models {
            for f in &m.fields {
                let probed =
                    probes.iter().any(|p| p.endpoint.path() == m.endpoint && p.field.as_deref() == Some(f.json_name()));
                let said = left_out.iter().any(|(at, _)| at == &format!("{} {}", m.endpoint, f.json_name()));
                assert!(probed ^ said, "{} {}: probed {probed}, left out {said}", m.endpoint, f.name);
            }
        }
        // Each probe is the base request plus its one field.
        let p = probes.iter().find(|p| p.field.as_deref() == Some("top_k") && !p.stream).unwrap();
        let mut base = base_request(p.endpoint, false);
        base["top_k"] = p.value.clone();
        assert_eq!(p.body, base);
    }

    #[test]
    fn a_sample_takes_every_nth_field_probe_and_every_base_probe() {
        let (probes, _) = sweep(&space(), &[Endpoint::Completions, Endpoint::Chat], &[false, true]);
        let bases = probes.iter().filter(|p| p.field.is_none()).count();
        assert_eq!(bases, 4);
        let s = sample(probes.clone(), 10, 3);
        assert_eq!(s.iter().filter(|p| p.field.is_none()).count(), bases);
        let fields = s.iter().filter(|p| p.field.is_some()).count();
        let expected = probes.iter().enumerate().filter(|(i, p)| p.field.is_some() && i % 10 == 3).count();
        assert_eq!(fields, expected);
        assert!(fields * 12 > probes.len() && fields * 8 < probes.len(), "{fields} of {}", probes.len());
    }

    fn observed(status: u16, body: Json) -> Observed {
        Observed { status: Some(status), body: Some(body), ..Default::default() }
    }

    #[test]
    fn volatile_fields_are_normalised_and_other_differences_named_by_path() {
        let a = observed(200, json!({"id": "a", "created": 1, "choices": [{"text": "hi", "finish_reason": "length"}]}));
        let b = observed(200, json!({"id": "b", "created": 2, "choices": [{"text": "hi", "finish_reason": "length"}]}));
        assert_eq!(compare(&a, &b), ProbeVerdict::Same);
        let s1 = observed(200, json!({"_sse": {"events": 3, "done": 1}}));
        assert_eq!(compare(&s1, &observed(200, json!({"_sse": {"events": 5, "done": 1}}))), ProbeVerdict::Same);
        assert!(matches!(
            compare(&s1, &observed(200, json!({"_sse": {"events": 3, "done": 0}}))),
            ProbeVerdict::Differs(_)
        ));
        let c = observed(200, json!({"id": "c", "choices": [{"text": "hi", "finish_reason": "stop"}]}));
        assert_eq!(
            compare(&a, &c),
            ProbeVerdict::Differs(vec![Difference {
                path: "response.choices[0].finish_reason".into(),
                reference: json!("length"),
                test: json!("stop"),
            }])
        );
        assert_eq!(compare(&observed(400, json!({})), &observed(422, json!({}))), ProbeVerdict::BothRefused);
        assert_eq!(compare(&a, &observed(400, json!({}))), ProbeVerdict::Refused(400));
        assert!(matches!(compare(&observed(400, json!({})), &a), ProbeVerdict::Differs(d) if d[0].path == "status"));
    }

    /// What a frontend of `version` sent for a prompt of `ids` and
    /// `max_tokens`, as the mock decoded it.
    fn sent(version: &str, ids: Vec<i64>, max_tokens: i64) -> Observed {
        use engine_protocol::internal::{engine_core_request_value, sampling_params_value};
        let r = engine_protocol::release(engine_protocol::Dialect::Vllm, version).unwrap();
        let mut sp = sampling_params_value(r);
        sp.set("max_tokens", engine_protocol::Value::Int(max_tokens));
        let engine_protocol::Value::Struct(add) = engine_core_request_value(r, "r", ids, sp, 0.0) else { panic!() };
        Observed { adds: vec![("r".into(), add)], ..observed(200, json!({})) }
    }

    #[test]
    fn the_prompt_is_compared_as_its_ids_across_a_list_and_0_34s_int32_array() {
        let list = sent("0.33.0", vec![5, 6, 7], 4);
        let array = sent("0.34.0", vec![5, 6, 7], 4);
        assert_eq!(compare(&list, &array), ProbeVerdict::Same);
        let other = sent("0.34.0", vec![5, 6, 8], 4);
        assert_eq!(
            compare(&list, &other),
            ProbeVerdict::Differs(vec![Difference {
                path: "sent[0].prompt_token_ids[2]".into(),
                reference: json!(7),
                test: json!(8),
            }])
        );
        assert!(
            matches!(compare(&list, &sent("0.34.0", vec![5, 6, 7], 5)), ProbeVerdict::Differs(d) if d[0].path == "sent[0].sampling_params.max_tokens")
        );
    }

    #[test]
    fn numbers_are_compared_as_the_f32_the_engine_sent() {
        let a = observed(200, json!({"lp": -0.10000000149011612, "n": 3}));
        assert_eq!(compare(&a, &observed(200, json!({"lp": -0.1, "n": 3}))), ProbeVerdict::Same);
        assert!(matches!(compare(&a, &observed(200, json!({"lp": -0.2, "n": 3}))), ProbeVerdict::Differs(_)));
        // Integers are compared exactly.
        assert!(matches!(compare(&a, &observed(200, json!({"lp": -0.1, "n": 4}))), ProbeVerdict::Differs(_)));
    }

    #[test]
    fn a_probe_shows_what_its_field_changes_not_what_the_base_request_already_does() {
        let d = |path: &str, a: Json, b: Json| Difference { path: path.into(), reference: a, test: b };
        let probe = |field: Option<&str>| DiffProbe {
            endpoint: Endpoint::Completions,
            stream: false,
            field: field.map(str::to_string),
            value: json!(true),
            body: json!({}),
        };
        let base_diff = d("sent[0].sampling_params.output_kind", json!(2), json!(0));
        let mut rs = vec![
            ProbeResult { probe: probe(None), verdict: ProbeVerdict::Differs(vec![base_diff.clone()]) },
            ProbeResult { probe: probe(Some("echo")), verdict: ProbeVerdict::Differs(vec![base_diff.clone()]) },
            ProbeResult {
                probe: probe(Some("ignore_eos")),
                verdict: ProbeVerdict::Differs(vec![
                    base_diff.clone(),
                    d("sent[0].sampling_params.ignore_eos", json!(true), json!(false)),
                ]),
            },
        ];
        subtract_base(&mut rs);
        assert_eq!(rs[0].verdict, ProbeVerdict::Differs(vec![base_diff]), "the base keeps its own");
        assert_eq!(rs[1].verdict, ProbeVerdict::Same);
        assert_eq!(
            rs[2].verdict,
            ProbeVerdict::Differs(vec![d("sent[0].sampling_params.ignore_eos", json!(true), json!(false))])
        );
    }

    #[test]
    fn the_matrix_keeps_the_worst_verdict_of_a_field() {
        let probe = |stream| DiffProbe {
            endpoint: Endpoint::Completions,
            stream,
            field: Some("top_k".into()),
            value: json!(1),
            body: json!({}),
        };
        let rs = vec![
            ProbeResult { probe: probe(false), verdict: ProbeVerdict::Same },
            ProbeResult { probe: probe(false), verdict: ProbeVerdict::Refused(400) },
            ProbeResult { probe: probe(true), verdict: ProbeVerdict::BothRefused },
        ];
        let m = matrix(&rs);
        assert_eq!(m["top_k"][&("/v1/completions".to_string(), false)], MatrixCell::Refused);
        assert_eq!(m["top_k"][&("/v1/completions".to_string(), true)], MatrixCell::Same);
        let md = matrix_markdown("g", &rs);
        assert!(md.contains("| `top_k` | refused | same |"), "{md}");
    }
}
