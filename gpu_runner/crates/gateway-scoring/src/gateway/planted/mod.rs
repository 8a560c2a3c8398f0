//! Planted bugs: of the ways a gateway can get the wire wrong, how many
//! does the suite notice? (docs/planted-bugs.md)
//!
//! The gateway is vLLM's own frontend, so that every difference is one the
//! campaign planted. Two copies of it run, each with the mock engine
//! behind it ([`super::differential`]); between the second and its engine
//! sits the fault wire, which plants one bug at a time by rewriting what
//! passes ([`crate::fault::rewrite`]): every field of the ADD (its
//! `EngineCoreRequest` and `SamplingParams`) set to its default (what
//! arrives when a sender drops it: the structs are positional) and to
//! another valid value, every field of each output (`EngineCoreOutput`)
//! and of the batch (`EngineCoreOutputs`) likewise, logprob rows with
//! their last two alternatives swapped, ABORTs withheld; and on the HTTP side,
//! the answer's text altered. The bugs are enumerated from the release's
//! tables ([`bugs`]): a field a release adds is a new bug without new
//! code.
//!
//! The differential's own probes are sent to both copies first with no
//! bug planted (the clean pass): a probe on which the two copies already
//! differ is left out, and each probe's ADDs, output batches and ABORTs
//! are kept, so that a bug is planted only on probes whose messages it
//! changes ([`applies`]). A bug is found when a probe it changed differs
//! from the reference ([`super::differential::compare`]); one no probe of
//! the sweep gives it a value to change is not planted, and says so.

use std::time::Duration;

use engine_protocol::{decode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

pub mod report;

pub use report::{judge, report, BugRow, Explained, ExplainedError, Judged, OutcomeLabel, PlantedReport, Totals};

use super::differential::{compare, request_of, DiffProbe, ProbeVerdict};
use super::lifecycle::{run_request, Session};
use super::Observed;
use crate::fault::{rewrite, Direction, FaultWire, FrameKind, Replacement, Rewrite, Schedule, WireFault, WireLog};

/// How a bug is planted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plant {
    /// A field of every ADD (`Direction::ToEngine`, `FrameKind::Add`) or
    /// of every output batch rewritten on the wire.
    Wire { direction: Direction, kind: FrameKind, rewrite: Rewrite },
    /// Every ABORT the gateway sends is not delivered.
    WithheldAbort,
    /// The first choice's text of the gateway's answer has a character
    /// appended on its way to the client.
    HttpText,
}

/// One planted bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bug {
    /// `add sampling_params.stop -> other`, `output outputs.*.finish_reason
    /// -> default`, `abort withheld`, `http text altered`.
    pub name: String,
    pub plant: Plant,
}

fn wire_bug(direction: Direction, kind: FrameKind, path: String, to: Replacement) -> Bug {
    let side = if kind == FrameKind::Add { "add" } else { "output" };
    Bug {
        name: format!("{side} {path} -> {}", to.name()),
        plant: Plant::Wire { direction, kind, rewrite: Rewrite { path, to } },
    }
}

fn holds_arrays(ty: &engine_protocol::schema::Ty) -> bool {
    use engine_protocol::schema::Ty;
    match ty {
        Ty::Optional(t) => holds_arrays(t),
        Ty::Tensor(_) => true,
        Ty::Struct(s) => s.fields.iter().any(|f| matches!(f.ty, Ty::Tensor(_))),
        _ => false,
    }
}

/// Every bug of `release`, from its tables: per field of the ADD
/// (`EngineCoreRequest`, its `sampling_params` field by field), of an
/// output (`outputs.*`) and of the output batch, the field set to its
/// default and to another value; a field holding arrays (logprobs) also
/// with each row's last two alternatives swapped; then ABORTs withheld and the
/// answer's text altered.
pub fn bugs(release: &'static ReleaseSchema) -> Vec<Bug> {
    let kinds = [Replacement::Default, Replacement::Other];
    let mut out = Vec::new();
    let add = |out: &mut Vec<Bug>, path: String| {
        for to in kinds {
            out.push(wire_bug(Direction::ToEngine, FrameKind::Add, path.clone(), to));
        }
    };
    if let Some(req) = release.engine_core_request.as_struct() {
        for f in req.fields {
            if f.name == "sampling_params" {
                for g in release.sampling_params.fields {
                    add(&mut out, format!("sampling_params.{}", g.name));
                }
            } else {
                add(&mut out, f.name.to_string());
            }
        }
    }
    let output = |out: &mut Vec<Bug>, path: String, ty| {
        for to in kinds {
            out.push(wire_bug(Direction::ToGateway, FrameKind::Outputs, path.clone(), to));
        }
        if holds_arrays(ty) {
            out.push(wire_bug(Direction::ToGateway, FrameKind::Outputs, path, Replacement::SwapLastTwo));
        }
    };
    if let Some(batch) = release.engine_core_outputs.as_struct() {
        for f in batch.fields {
            if f.name == "outputs" {
                for g in release.engine_core_output.fields {
                    output(&mut out, format!("outputs.*.{}", g.name), g.ty);
                }
            } else {
                output(&mut out, f.name.to_string(), f.ty);
            }
        }
    }
    out.push(Bug { name: "abort withheld".into(), plant: Plant::WithheldAbort });
    out.push(Bug { name: "http text altered".into(), plant: Plant::HttpText });
    out
}

/// What the test side did on a probe with no bug planted.
#[derive(Debug, Clone, Default)]
pub struct Clean {
    /// The ADDs its engine read.
    pub adds: Vec<StructValue>,
    /// The output batches its engine sent (frames as sent).
    pub outputs: Vec<Vec<Vec<u8>>>,
    pub aborts: usize,
    /// The answer's first choice's text, if it had one.
    pub text: Option<String>,
    /// The reference and the test side already differ on it, in words
    /// (the probe is left out).
    pub noisy: Option<String>,
}

/// Whether `bug` changes anything of `clean` (a probe it can be planted on).
pub fn applies(bug: &Bug, clean: &Clean, release: &'static ReleaseSchema) -> bool {
    if clean.noisy.is_some() {
        return false;
    }
    match &bug.plant {
        Plant::WithheldAbort => clean.aborts > 0,
        Plant::HttpText => clean.text.is_some(),
        // A rewrite that changes the message and still encodes (a struct
        // made of defaults may lack what its encoder needs).
        Plant::Wire { kind: FrameKind::Add, rewrite: rw, .. } => clean.adds.iter().any(|a| {
            let mut v = Value::Struct(a.clone());
            changes(&mut v, release, MessageKind::EngineCoreRequest, release.engine_core_request, rw)
        }),
        Plant::Wire { rewrite: rw, .. } => clean.outputs.iter().any(|frames| {
            let d = decode_message(release, MessageKind::EngineCoreOutputs, frames, &Limits::default());
            d.is_ok_and(|mut d| {
                changes(&mut d.value, release, MessageKind::EngineCoreOutputs, release.engine_core_outputs, rw)
            })
        }),
    }
}

fn changes(
    v: &mut Value,
    release: &'static ReleaseSchema,
    kind: MessageKind,
    ty: &engine_protocol::schema::Ty,
    rw: &Rewrite,
) -> bool {
    rewrite::apply(v, ty, rw).is_ok_and(|n| n > 0) && engine_protocol::encode_message(release, kind, v).is_ok()
}

/// The first choice's text (`text`, or `message.content`).
pub fn first_text(body: &Json) -> Option<String> {
    let c = body.get("choices")?.get(0)?;
    c.get("text").or_else(|| c.get("message")?.get("content"))?.as_str().map(String::from)
}

/// Probes the campaign adds to the sweep, for bugs the sweep's values do
/// not reach (its integers are the bounds and one past them: `logprobs`
/// 0 asks for no alternative, so no logprob row has alternatives to swap).
/// Per base probe both sides served alike: the same request
///
/// - with `max_tokens` 16 and a stop string taken from its own clean answer
///   past the first character, so that the frontend meets the stop string
///   while the engine still generates and aborts the engine's request
///   (vLLM's frontend detects stop strings and aborts,
///   `vllm/v1/engine/output_processor.py`);
/// - asking for three alternatives per sampled token (completions
///   `logprobs` 3; chat `logprobs` true, `top_logprobs` 3) and three per
///   prompt token (`prompt_logprobs` 3): the least that shows two of them
///   swapped ([`Replacement::SwapLastTwo`]).
pub fn extra_probes(probes: &[DiffProbe], clean: &[Clean]) -> Vec<DiffProbe> {
    let mut out = Vec::new();
    for (p, c) in probes.iter().zip(clean) {
        if p.field.is_some() || c.noisy.is_some() {
            continue;
        }
        let mut with = |field: &str, value: Json, set: &[(&str, Json)]| {
            let mut body = p.body.clone();
            for (k, v) in set {
                body[*k] = v.clone();
            }
            out.push(DiffProbe { endpoint: p.endpoint, stream: p.stream, field: Some(field.into()), value, body });
        };
        if let Some(stop) = c.text.as_ref().map(|t| t.chars().skip(1).take(2).collect::<String>()) {
            if !stop.trim().is_empty() {
                with("stop", json!([stop]), &[("max_tokens", json!(16)), ("stop", json!([stop]))]);
            }
        }
        match p.endpoint {
            super::Endpoint::Completions => with("logprobs", json!(3), &[("logprobs", json!(3))]),
            super::Endpoint::Chat => {
                with("top_logprobs", json!(3), &[("logprobs", json!(true)), ("top_logprobs", json!(3))])
            }
        }
        with("prompt_logprobs", json!(3), &[("prompt_logprobs", json!(3))]);
    }
    out
}

/// `body` with its first choice's text (`text`, or `message.content`) one
/// character longer; false when it has none.
pub fn alter_text(body: &mut Json) -> bool {
    let Some(c) = body.get_mut("choices").and_then(|c| c.get_mut(0)) else { return false };
    let slot = match c.get("text") {
        Some(Json::String(_)) => c.get_mut("text"),
        _ => c.get_mut("message").and_then(|m| m.get_mut("content")),
    };
    match slot {
        Some(Json::String(s)) => {
            s.push('!');
            true
        }
        _ => false,
    }
}

/// How a bug came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A probe it changed differed from the reference: the probe's index
    /// and the differing paths.
    Found { probe: usize, differences: Vec<String> },
    /// Planted on these probes (it changed what passed), none differed.
    Missed { probes: Vec<usize> },
    /// Not planted, and why (no probe carries a value it changes, or it
    /// never took effect on the wire).
    NotPlanted(String),
}

impl Outcome {
    /// The outcome's name in the report.
    pub fn label(&self) -> OutcomeLabel {
        match self {
            Outcome::Found { .. } => OutcomeLabel::Found,
            Outcome::Missed { .. } => OutcomeLabel::Missed,
            Outcome::NotPlanted(_) => OutcomeLabel::NotPlanted,
        }
    }
}

/// The two sides and the wire a campaign runs on.
pub struct Rig<'a> {
    pub reference: &'a Session,
    pub test: &'a Session,
    pub wire: &'a FaultWire,
    pub model: &'a str,
    pub grace: Duration,
    /// How long a request may take (a planted bug may make the gateway
    /// wait for an output that never comes).
    pub timeout: Duration,
}

impl Rig<'_> {
    /// `p` sent to the reference, then to the test side: what each showed.
    async fn observe(&self, p: &DiffProbe) -> (Observed, Observed) {
        let req = request_of(p.endpoint, &p.body, self.grace, self.timeout);
        let a = run_request(self.reference, &req, self.model, self.reference.release()).await;
        let b = run_request(self.test, &req, self.model, self.test.release()).await;
        (a, b)
    }

    async fn send(&self, p: &DiffProbe, text: bool) -> ProbeVerdict {
        let (a, mut b) = self.observe(p).await;
        if text {
            if let Some(body) = b.body.as_mut() {
                alter_text(body);
            }
        }
        compare(&a, &b)
    }

    /// Whether the test side still serves `probe` (200) with no bug
    /// planted: a bug may leave vLLM's frontend dead (an output it cannot
    /// process stops its engine client), and every later bug would then
    /// change nothing.
    pub async fn healthy(&self, probe: &DiffProbe) -> bool {
        self.wire.rearm(Schedule::none());
        let req = request_of(probe.endpoint, &probe.body, self.grace, self.timeout);
        run_request(self.test, &req, self.model, self.test.release()).await.status == Some(200)
    }

    /// Every probe with no bug planted (the wire armed with an empty
    /// schedule, keeping the output batches).
    pub async fn clean_pass(&self, probes: &[DiffProbe]) -> Vec<Clean> {
        self.wire.rearm(Schedule::none());
        self.wire.keep_outputs(true);
        let mut out = Vec::with_capacity(probes.len());
        for p in probes {
            let _ = self.wire.take_outputs();
            let (a, b) = self.observe(p).await;
            let noisy = match compare(&a, &b) {
                ProbeVerdict::Same => None,
                ProbeVerdict::BothRefused => Some("both refuse it".to_string()),
                v => Some(format!("differs already: {}", verdict_paths(&v).join(", "))),
            };
            let body = b.body.clone().unwrap_or(Json::Null);
            out.push(Clean {
                adds: b.adds.iter().map(|(_, s)| s.clone()).collect(),
                outputs: self.wire.take_outputs(),
                aborts: b.aborts.len(),
                text: if b.status == Some(200) { first_text(&body) } else { None },
                noisy,
            });
        }
        self.wire.keep_outputs(false);
        out
    }

    /// Plants `bug` on up to `tries` probes it applies to, until one
    /// differs.
    pub async fn plant(&self, bug: &Bug, probes: &[DiffProbe], clean: &[Clean], tries: usize) -> Outcome {
        let release = self.test.release();
        let candidates = interleaved(probes, (0..probes.len()).filter(|&i| applies(bug, &clean[i], release)));
        if candidates.is_empty() {
            return Outcome::NotPlanted("no probe of the sweep carries a value it changes".into());
        }
        let schedule = match &bug.plant {
            Plant::Wire { direction, kind, rewrite } => {
                Schedule::single(*direction, *kind, None, WireFault::Rewrite(rewrite.clone()))
            }
            Plant::WithheldAbort => Schedule::single(Direction::ToEngine, FrameKind::Abort, None, WireFault::Drop),
            Plant::HttpText => Schedule::none(),
        };
        // What shows the bug took: a message rewritten, or an ABORT dropped.
        let counter = |log: &WireLog| match &bug.plant {
            Plant::Wire { .. } => log.rewritten,
            Plant::WithheldAbort => log.applied.len() as u64,
            Plant::HttpText => 0,
        };
        let mut planted = Vec::new();
        for &i in candidates.iter().take(tries) {
            self.wire.rearm(schedule.clone());
            let before = self.wire.read_log(counter);
            let verdict = self.send(&probes[i], bug.plant == Plant::HttpText).await;
            let after = self.wire.read_log(counter);
            self.wire.rearm(Schedule::none());
            let took = bug.plant == Plant::HttpText || after > before;
            if !took {
                continue;
            }
            planted.push(i);
            if !matches!(verdict, ProbeVerdict::Same) {
                return Outcome::Found { probe: i, differences: verdict_paths(&verdict) };
            }
        }
        if planted.is_empty() {
            return Outcome::NotPlanted(format!(
                "it changed nothing on the wire on the {} probe(s) it was tried on",
                candidates.len().min(tries)
            ));
        }
        Outcome::Missed { probes: planted }
    }
}

/// `indices` of `probes` taken in turn from each endpoint and stream
/// (the first completions probe, the first chat probe, the second
/// completions probe, ...): a bug tried on a few probes meets every
/// shape of answer (completions' `top_logprobs` is an object keyed by
/// token, chat's a list).
pub fn interleaved(probes: &[DiffProbe], indices: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut groups: Vec<((&str, bool), Vec<usize>)> = Vec::new();
    for i in indices {
        let key = (probes[i].endpoint.path(), probes[i].stream);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let longest = groups.iter().map(|(_, g)| g.len()).max().unwrap_or(0);
    (0..longest).flat_map(|n| groups.iter().filter_map(move |(_, g)| g.get(n).copied())).collect()
}

fn verdict_paths(v: &ProbeVerdict) -> Vec<String> {
    match v {
        ProbeVerdict::Same => vec![],
        ProbeVerdict::BothRefused => vec!["both refused".into()],
        ProbeVerdict::Refused(s) => vec![format!("status {s} (the reference answered 200)")],
        ProbeVerdict::Differs(d) => d.iter().map(|x| x.path.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine_protocol::VLLM_0_32_0;

    #[test]
    fn the_bugs_come_from_the_releases_tables_every_field_of_the_add_and_the_outputs() {
        let r = VLLM_0_32_0;
        let b = bugs(r);
        let names: Vec<&str> = b.iter().map(|b| b.name.as_str()).collect();
        for f in r.sampling_params.fields {
            assert!(names.contains(&format!("add sampling_params.{} -> default", f.name).as_str()), "{}", f.name);
            assert!(names.contains(&format!("add sampling_params.{} -> other", f.name).as_str()), "{}", f.name);
        }
        for f in r.engine_core_output.fields {
            assert!(names.contains(&format!("output outputs.*.{} -> other", f.name).as_str()), "{}", f.name);
        }
        assert!(names.contains(&"output outputs.*.new_logprobs -> swap-last-two"));
        assert!(names.contains(&"abort withheld") && names.contains(&"http text altered"));
        let unique: std::collections::BTreeSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "bug names are unique");
        // A later release's added field is a bug more, with no code.
        let later = bugs(engine_protocol::VLLM_0_34_0);
        assert!(later.len() > b.len(), "{} vs {}", later.len(), b.len());
    }

    fn clean_with_add(sp: impl FnOnce(&mut StructValue)) -> Clean {
        let r = VLLM_0_32_0;
        let mut s = engine_protocol::internal::sampling_params_value(r);
        sp(&mut s);
        let Value::Struct(add) = engine_protocol::internal::engine_core_request_value(r, "r", vec![1, 2], s, 0.0)
        else {
            unreachable!()
        };
        Clean { adds: vec![add], ..Default::default() }
    }

    #[test]
    fn a_bug_is_planted_only_on_a_probe_whose_message_it_changes() {
        let r = VLLM_0_32_0;
        let drop_stop = |to| wire_bug(Direction::ToEngine, FrameKind::Add, "sampling_params.stop".into(), to);
        let plain = clean_with_add(|_| {});
        let with_stop = clean_with_add(|s| {
            s.set("stop", Value::Array(vec![Value::Str("x".into())]));
        });
        assert!(!applies(&drop_stop(Replacement::Default), &plain, r), "no stop to drop");
        assert!(applies(&drop_stop(Replacement::Default), &with_stop, r));
        assert!(applies(&drop_stop(Replacement::Other), &plain, r), "one stop string where there was none");
        let noisy = Clean { noisy: Some("differs already".into()), ..with_stop };
        assert!(!applies(&drop_stop(Replacement::Default), &noisy, r));
        assert!(!applies(&Bug { name: "abort withheld".into(), plant: Plant::WithheldAbort }, &plain, r));
    }

    #[test]
    fn candidates_are_taken_in_turn_from_each_endpoint_and_stream() {
        let p = |e, stream| DiffProbe { endpoint: e, stream, field: None, value: Json::Null, body: json!({}) };
        use super::super::Endpoint::{Chat, Completions};
        let probes =
            vec![p(Completions, false), p(Completions, false), p(Completions, true), p(Chat, false), p(Chat, false)];
        assert_eq!(interleaved(&probes, 0..5), vec![0, 2, 3, 1, 4]);
        assert_eq!(interleaved(&probes, [1, 4].into_iter()), vec![1, 4]);
    }

    #[test]
    fn the_answers_text_is_altered_in_either_endpoints_shape() {
        let mut c = json!({"choices": [{"text": "hi"}]});
        assert!(alter_text(&mut c));
        assert_eq!(c["choices"][0]["text"], "hi!");
        let mut m = json!({"choices": [{"message": {"content": "hi"}}]});
        assert!(alter_text(&mut m));
        assert_eq!(m["choices"][0]["message"]["content"], "hi!");
        assert!(!alter_text(&mut json!({"error": "x"})));
    }
}
