//! What a replay scenario may ask of the served model, derived from the
//! model's own files (its tokenizer, tokenizer config and generation
//! config) and its fingerprint, and the directives that ask it
//! (docs/runner/scenarios.md, "Scenarios on any model").
//!
//! A scenario states intent ("force EOS", "a token that spells two
//! letters", "every whitespace token") as a directive string in its JSON;
//! [`resolve`] replaces each with this model's ids before the scenario is
//! read, so the same file runs on the tiny model, an instruct-shaped one
//! and a published checkpoint. Facts (each derived the same way on every
//! model):
//!
//! - `$model.eos`: the EOS id vLLM's frontend sends as `_eos_token_id`
//!   (`tokenizer_config.json`'s `eos_token`, else the generation config's
//!   first `eos_token_id`);
//! - `$model.eos_ids`: that id and the generation config's other EOS ids
//!   (the ids vLLM stops on); spliced into a list, or one key each in an
//!   object;
//! - `$model.plain_token`: the lowest id that is no special or added token
//!   and no EOS id and spells a word of two or more ASCII lowercase
//!   letters;
//! - `$model.repeat_token`, `$model.repeat_stop`, `$model.repeat_cut`: the
//!   lowest such id spelling two different letters `xy` that decodes,
//!   repeated, to `xyxy...`; the stop string `yx`, which only spans two of
//!   them, and the text before its first occurrence (`x`);
//!   `$model.repeat_text`: that token's own text `xy` (a stop string of
//!   exactly one token);
//! - `$model.whitespace_tokens`: every id (no special token) whose text is
//!   whitespace only; a list, or one key each in an object;
//! - `{"$model.offline_greedy": {"prompt_token_ids": [...], "max_tokens":
//!   N, "ignore_eos": bool}}`: the token ids vLLM's own offline
//!   `LLM.generate` gives at temperature 0 on the served checkpoint, run in
//!   the engine's venv before the engine starts (`--engine vllm-cpu` only).
//!
//! A check whose directive the model cannot satisfy is left out, and the
//! run names it.
//! A check that carries `"models": [fingerprints]` (outputs pinned for
//! those checkpoints) is kept only when the served model's fingerprint is
//! listed. A directive this model cannot satisfy makes the scenario not
//! apply, with the reason; an unknown directive is a load error.

use serde_json::{Map, Value as Json};

use engine_protocol::translate::GatewayTokenizer;

/// The prefix of every directive.
const PREFIX: &str = "$model.";

/// The facts of one model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFacts {
    /// `sha256:<hex>` of the weights (`model.safetensors`), else of
    /// `config.json`; `None` without either.
    pub fingerprint: Option<String>,
    /// The vocabulary size, added tokens included (`None`: not known, any
    /// prompt id is taken).
    pub vocab_size: Option<usize>,
    pub eos: Option<u32>,
    pub eos_ids: Vec<u32>,
    pub plain_token: Option<u32>,
    pub repeat: Option<Repeat>,
    pub whitespace_tokens: Vec<u32>,
    /// Where vLLM's offline greedy oracle can run (`None`: it cannot, on
    /// this engine).
    pub offline: Option<OfflineOracle>,
    /// The model's experts (`config.json`, [`experts_in_config`]): above
    /// zero it is a mixture-of-experts model, whose data-parallel ranks
    /// vLLM runs in lockstep waves.
    pub experts: u64,
}

/// The number of experts a model's `config.json` names, as vLLM 0.32.0
/// reads it (`vllm/transformers_utils/model_arch_config_convertor.py`
/// `get_num_experts`: the first of `num_experts`, `moe_num_experts`,
/// `n_routed_experts`, `num_local_experts` present, in the text config of a
/// multimodal model); 0 for a dense model. vLLM's `ModelConfig.is_moe` is
/// this number being above zero.
pub fn experts_in_config(config: &Json) -> u64 {
    let text = config.get("text_config").filter(|t| t.is_object()).unwrap_or(config);
    ["num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts"]
        .iter()
        .find_map(|k| text.get(*k).filter(|v| !v.is_null()))
        .map_or(0, |v| match v {
            Json::Array(a) => a.first().and_then(Json::as_u64).unwrap_or(0),
            v => v.as_u64().unwrap_or(0),
        })
}

/// What running vLLM's offline `LLM.generate` on the served checkpoint
/// takes: the venv with vLLM, the model directory (with weights), and a
/// scratch directory for the script.
#[derive(Debug, Clone, PartialEq)]
pub struct OfflineOracle {
    pub venv: std::path::PathBuf,
    pub model: std::path::PathBuf,
    pub work: std::path::PathBuf,
}

/// The name of the offline-oracle directive (an object's only key).
const OFFLINE_GREEDY: &str = "$model.offline_greedy";

/// A token spelling two different letters `xy`, and the stop string `yx`
/// that spans two of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    pub id: u32,
    /// The token's text, `xy`.
    pub text: String,
    pub stop: String,
    pub cut: String,
}

impl ModelFacts {
    /// The facts of the model whose tokenizer (with its model-directory
    /// EOS facts) is `tok`.
    pub fn of(tok: &GatewayTokenizer, fingerprint: Option<String>) -> ModelFacts {
        let eos = tok.eos_token_id.or_else(|| tok.generation_eos_token_ids.first().copied());
        let mut eos_ids: Vec<u32> = eos.into_iter().collect();
        for &id in &tok.generation_eos_token_ids {
            if !eos_ids.contains(&id) {
                eos_ids.push(id);
            }
        }
        let mut facts =
            ModelFacts { fingerprint, vocab_size: Some(tok.vocab_size()), eos, eos_ids, ..Default::default() };
        for id in 0..tok.vocab_size() as u32 {
            if tok.added_tokens.contains_key(&id) || facts.eos_ids.contains(&id) {
                continue;
            }
            let text = tok.decode(&[id], false);
            if !text.is_empty() && text.chars().all(char::is_whitespace) {
                facts.whitespace_tokens.push(id);
            }
            let word = text.len() >= 2 && text.bytes().all(|b| b.is_ascii_lowercase());
            if word && facts.plain_token.is_none() {
                facts.plain_token = Some(id);
            }
            if let (true, None, [x, y]) = (word, &facts.repeat, text.as_bytes()) {
                let (x, y) = (*x as char, *y as char);
                if x != y && tok.decode(&[id, id, id], false) == text.repeat(3) {
                    facts.repeat = Some(Repeat { id, text: text.clone(), stop: format!("{y}{x}"), cut: x.to_string() });
                }
            }
        }
        facts
    }
}

/// A directive of the vocabulary above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Directive {
    Eos,
    EosIds,
    PlainToken,
    RepeatToken,
    RepeatStop,
    RepeatCut,
    RepeatText,
    WhitespaceTokens,
}

impl Directive {
    /// Every directive with its name (after `$model.`).
    const ALL: [(&'static str, Directive); 8] = [
        ("eos", Directive::Eos),
        ("eos_ids", Directive::EosIds),
        ("plain_token", Directive::PlainToken),
        ("repeat_token", Directive::RepeatToken),
        ("repeat_stop", Directive::RepeatStop),
        ("repeat_cut", Directive::RepeatCut),
        ("repeat_text", Directive::RepeatText),
        ("whitespace_tokens", Directive::WhitespaceTokens),
    ];

    /// The directive a string names; `Ok(None)` for a string that is no
    /// directive.
    fn parse(s: &str) -> Result<Option<Directive>, DirectiveError> {
        let Some(name) = s.strip_prefix(PREFIX) else { return Ok(None) };
        match Directive::ALL.iter().find(|(n, _)| *n == name) {
            Some((_, d)) => Ok(Some(*d)),
            None => Err(DirectiveError::Unknown(s.to_string())),
        }
    }

    /// This directive's value on `facts`: one JSON value (a scalar) or
    /// several (a list, spliced); `Err` says why the model has none.
    fn value(self, facts: &ModelFacts) -> Result<Vec<Json>, String> {
        let one = |x: Option<Json>, why: &str| x.map(|v| vec![v]).ok_or_else(|| why.to_string());
        let ids = |xs: &[u32], why: &str| {
            if xs.is_empty() {
                Err(why.to_string())
            } else {
                Ok(xs.iter().map(|&i| Json::from(i)).collect())
            }
        };
        let repeat = "no token spells two different letters that repeat as text";
        match self {
            Directive::Eos => one(facts.eos.map(Json::from), "the model names no EOS token"),
            Directive::EosIds => ids(&facts.eos_ids, "the model names no EOS token"),
            Directive::PlainToken => {
                one(facts.plain_token.map(Json::from), "no ordinary token spells a lowercase ASCII word")
            }
            Directive::RepeatToken => one(facts.repeat.as_ref().map(|r| Json::from(r.id)), repeat),
            Directive::RepeatStop => one(facts.repeat.as_ref().map(|r| Json::from(r.stop.clone())), repeat),
            Directive::RepeatCut => one(facts.repeat.as_ref().map(|r| Json::from(r.cut.clone())), repeat),
            Directive::RepeatText => one(facts.repeat.as_ref().map(|r| Json::from(r.text.clone())), repeat),
            Directive::WhitespaceTokens => ids(&facts.whitespace_tokens, "no token is whitespace only"),
        }
    }

    /// What stands in for the value on a model without one, so that the
    /// scenario still reads: a value of the type the directive gives.
    fn stand_in(self) -> Json {
        match self {
            Directive::RepeatStop | Directive::RepeatCut | Directive::RepeatText => Json::from(""),
            _ => Json::from(0),
        }
    }

    /// Whether the value is a list (spliced), not one value.
    fn is_list(self) -> bool {
        matches!(self, Directive::EosIds | Directive::WhitespaceTokens)
    }
}

/// A directive that no model can satisfy: a load error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DirectiveError {
    /// `$model.<name>` with a name the vocabulary lacks.
    #[error("unknown directive `{0}` (known: {known})", known = known())]
    Unknown(String),
    /// A list directive where one value is needed.
    #[error("`{0}` is a list of ids: it can only stand in a list or as an object key")]
    ListAsValue(String),
    /// `$model.offline_greedy`'s arguments do not read.
    #[error(
        "`$model.offline_greedy` takes {{\"prompt_token_ids\": [ids], \"max_tokens\": n, \"ignore_eos\": bool}}: {0}"
    )]
    OfflineArgs(String),
    /// The offline oracle ran and failed.
    #[error("vLLM's offline LLM.generate (the greedy oracle) failed: {0}")]
    Oracle(String),
}

fn known() -> String {
    Directive::ALL.iter().map(|(n, _)| format!("{PREFIX}{n}")).collect::<Vec<_>>().join(", ")
}

/// What resolving a scenario's directives left to say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolution {
    /// Why the scenario does not apply to this model (directives it cannot
    /// satisfy, each once); empty when it does.
    pub unmet: Vec<String>,
    /// Checks left out, with why (`checks[i] <name> (pinned to other
    /// models)`, or a directive of the check the model cannot satisfy).
    pub left_out: Vec<String>,
}

/// Replaces every directive in the scenario `v` by its value on `facts`,
/// and leaves out the checks pinned to other models or asking what the
/// model cannot give. A directive the model
/// cannot satisfy is replaced by a stand-in of its type (so that the
/// scenario still reads) and noted in [`Resolution::unmet`].
pub fn resolve(v: &mut Json, facts: &ModelFacts) -> Result<Resolution, DirectiveError> {
    let mut res = Resolution::default();
    if let Some(Json::Array(checks)) = v.get_mut("checks") {
        let mut kept = Vec::with_capacity(checks.len());
        for (i, mut c) in std::mem::take(checks).into_iter().enumerate() {
            let name = c.get("check").and_then(Json::as_str).unwrap_or("?").to_string();
            let pinned_here = match c.get("models").and_then(Json::as_array) {
                None => true,
                Some(pins) => facts.fingerprint.as_ref().is_some_and(|fp| pins.iter().any(|p| p.as_str() == Some(fp))),
            };
            if !pinned_here {
                res.left_out.push(format!("checks[{i}] {name} (pinned to other models)"));
                continue;
            }
            let mut own = Resolution::default();
            walk(&mut c, facts, &mut own)?;
            if own.unmet.is_empty() {
                kept.push(c);
            } else {
                res.left_out.push(format!("checks[{i}] {name} ({})", own.unmet.join("; ")));
            }
        }
        *checks = kept;
    }
    walk(v, facts, &mut res)?;
    if let Some(vocab) = facts.vocab_size {
        outside_vocabulary(v, vocab, &mut res);
    }
    Ok(res)
}

/// Notes a prompt id the model's vocabulary lacks (the committed prompts
/// are ids below 464, ordinary tokens of any larger vocabulary).
fn outside_vocabulary(v: &Json, vocab: usize, res: &mut Resolution) {
    let requests = v.get("requests").and_then(Json::as_array).map_or(&[][..], Vec::as_slice);
    for (i, r) in requests.iter().enumerate() {
        let ids = r.pointer("/request/prompt_token_ids").and_then(Json::as_array).map_or(&[][..], Vec::as_slice);
        if let Some(id) = ids.iter().filter_map(Json::as_u64).find(|&id| id >= vocab as u64) {
            res.unmet.push(format!("requests[{i}]: prompt id {id} is outside the model's vocabulary ({vocab})"));
        }
    }
}

fn walk(v: &mut Json, facts: &ModelFacts, res: &mut Resolution) -> Result<(), DirectiveError> {
    match v {
        Json::String(s) => {
            if let Some(d) = Directive::parse(s)? {
                if d.is_list() {
                    return Err(DirectiveError::ListAsValue(s.clone()));
                }
                *v = values(d, facts, res).remove(0);
            }
        }
        Json::Array(xs) => {
            let mut out = Vec::with_capacity(xs.len());
            for mut x in std::mem::take(xs) {
                match x.as_str().map(Directive::parse).transpose()?.flatten() {
                    Some(d) if d.is_list() => out.extend(values(d, facts, res)),
                    _ => {
                        walk(&mut x, facts, res)?;
                        out.push(x);
                    }
                }
            }
            *xs = out;
        }
        Json::Object(m) if m.len() == 1 && m.contains_key(OFFLINE_GREEDY) => {
            *v = offline_greedy(&m[OFFLINE_GREEDY], facts, res)?;
        }
        Json::Object(m) => {
            let mut out = Map::new();
            for (k, mut x) in std::mem::take(m) {
                walk(&mut x, facts, res)?;
                match Directive::parse(&k)? {
                    None => {
                        out.insert(k, x);
                    }
                    Some(d) => {
                        for key in values(d, facts, res) {
                            let key = match key {
                                Json::String(s) => s,
                                other => other.to_string(),
                            };
                            out.insert(key, x.clone());
                        }
                    }
                }
            }
            *m = out;
        }
        _ => {}
    }
    Ok(())
}

/// The greedy oracle's token ids for the arguments `args`; an empty list
/// noted as unmet where the oracle cannot run.
fn offline_greedy(args: &Json, facts: &ModelFacts, res: &mut Resolution) -> Result<Json, DirectiveError> {
    let bad = |why: &str| DirectiveError::OfflineArgs(why.to_string());
    let prompt: Vec<i64> = args
        .get("prompt_token_ids")
        .and_then(Json::as_array)
        .and_then(|a| a.iter().map(Json::as_i64).collect())
        .ok_or_else(|| bad("prompt_token_ids must be a list of ids"))?;
    let max_tokens = args.get("max_tokens").and_then(Json::as_u64).ok_or_else(|| bad("max_tokens missing"))?;
    let ignore_eos = args.get("ignore_eos").and_then(Json::as_bool).unwrap_or(false);
    let Some(o) = &facts.offline else {
        let why = "no offline oracle on this engine (vLLM's LLM.generate runs for --engine vllm-cpu)".to_string();
        if !res.unmet.contains(&why) {
            res.unmet.push(why);
        }
        return Ok(Json::Array(Vec::new()));
    };
    let timeout = std::time::Duration::from_secs(600);
    let ids =
        process_sandbox::launcher::offline_greedy(&o.venv, &o.model, &o.work, &prompt, max_tokens, ignore_eos, timeout)
            .map_err(|e| DirectiveError::Oracle(e.to_string()))?;
    Ok(Json::from(ids))
}

/// The value(s) of `d`, or its stand-in, noted as unmet.
fn values(d: Directive, facts: &ModelFacts, res: &mut Resolution) -> Vec<Json> {
    d.value(facts).unwrap_or_else(|why| {
        if !res.unmet.contains(&why) {
            res.unmet.push(why);
        }
        vec![d.stand_in()]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tok(dir: &str) -> GatewayTokenizer {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        engine_testkit::model::tokenizer(&root.join(dir)).expect("model directory")
    }

    #[test]
    fn the_tiny_models_facts_are_its_eos_ids_and_tokens_of_its_vocabulary() {
        let t = tok("golden/tiny");
        let f = ModelFacts::of(&t, None);
        assert_eq!((f.eos, f.eos_ids.as_slice()), (Some(2), &[2, 4][..]));
        let r = f.repeat.clone().expect("a repeating two-letter token");
        let twice = t.decode(&[r.id, r.id], false);
        assert_eq!(twice.find(&r.stop).map(|at| &twice[..at]), Some(r.cut.as_str()), "{twice:?}");
        assert!(!f.whitespace_tokens.is_empty());
        for &w in &f.whitespace_tokens {
            assert!(t.decode(&[w], false).trim().is_empty());
        }
        let p = f.plain_token.expect("a plain token");
        assert!(!f.eos_ids.contains(&p) && t.decode(&[p], false).bytes().all(|b| b.is_ascii_lowercase()));
    }

    #[test]
    fn the_instruct_models_eos_is_its_im_end_at_the_end_of_the_vocabulary() {
        let f = ModelFacts::of(&tok("golden/instruct"), None);
        assert_eq!((f.eos, f.eos_ids.as_slice()), (Some(511), &[511, 509][..]));
        assert!(f.whitespace_tokens.iter().all(|&w| w < 509));
    }

    #[test]
    fn directives_become_the_models_ids_as_values_list_elements_and_keys() {
        let f = ModelFacts::of(&tok("golden/instruct"), None);
        let r = f.repeat.clone().unwrap();
        let mut v = json!({
            "requests": [{"request": {"stop_token_ids": ["$model.plain_token"], "stop": ["$model.repeat_stop"],
                "logit_bias": {"$model.eos": 100.0, "$model.whitespace_tokens": -100.0}}}],
            "checks": [{"check": "no_token_in_first", "tokens": [7, "$model.eos_ids"], "n": 2},
                       {"check": "text", "is": "$model.repeat_cut"}]
        });
        let res = resolve(&mut v, &f).unwrap();
        assert_eq!(res, Resolution::default());
        let req = &v["requests"][0]["request"];
        assert_eq!(req["stop_token_ids"], json!([f.plain_token.unwrap()]));
        assert_eq!(req["stop"], json!([r.stop]));
        let bias = req["logit_bias"].as_object().unwrap();
        assert_eq!(bias["511"], json!(100.0));
        assert_eq!(bias.len(), 1 + f.whitespace_tokens.len());
        assert_eq!(v["checks"][0]["tokens"], json!([7, 511, 509]));
        assert_eq!(v["checks"][1]["is"], json!(r.cut));
    }

    #[test]
    fn every_committed_replay_scenario_applies_to_both_committed_models() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        for model in ["golden/tiny", "golden/instruct"] {
            let facts = ModelFacts::of(&tok(model), None);
            let scenarios = crate::scenario::load_dir(&root.join("golden/replay"), &facts).expect("loads");
            for s in &scenarios {
                assert!(s.not_applicable.is_empty(), "{model}: {} does not apply: {:?}", s.name, s.not_applicable);
            }
            // Read for no model, the scenarios that ask the model do not apply.
            let none = crate::scenario::load_dir(&root.join("golden/replay"), &ModelFacts::default()).unwrap();
            assert!(none.iter().any(|s| s.name == "eos_stop" && !s.not_applicable.is_empty()));
        }
    }

    #[test]
    fn an_unknown_directive_or_a_list_as_one_value_is_an_error() {
        let f = ModelFacts::default();
        assert_eq!(resolve(&mut json!({"x": "$model.bos"}), &f), Err(DirectiveError::Unknown("$model.bos".into())));
        assert_eq!(
            resolve(&mut json!({"x": "$model.eos_ids"}), &f),
            Err(DirectiveError::ListAsValue("$model.eos_ids".into()))
        );
    }

    #[test]
    fn a_directive_the_model_cannot_satisfy_makes_the_scenario_not_apply() {
        let mut v = json!({"logit_bias": {"$model.eos": 100.0}});
        let res = resolve(&mut v, &ModelFacts::default()).unwrap();
        assert_eq!(res.unmet, vec!["the model names no EOS token".to_string()]);
    }

    #[test]
    fn a_check_asking_what_the_engine_cannot_give_is_left_out_with_the_reason() {
        let mut v = json!({"checks": [
            {"check": "tokens", "is": {"$model.offline_greedy": {"prompt_token_ids": [1, 2], "max_tokens": 4}}},
            {"check": "num_tokens", "is": 4}
        ]});
        let res = resolve(&mut v, &ModelFacts::default()).unwrap();
        assert!(res.unmet.is_empty(), "the scenario still applies");
        assert_eq!(res.left_out.len(), 1);
        assert!(res.left_out[0].starts_with("checks[0] tokens (no offline oracle"), "{:?}", res.left_out);
        assert_eq!(v["checks"], json!([{"check": "num_tokens", "is": 4}]));
        let mut bad = json!({"checks": [{"check": "tokens", "is": {"$model.offline_greedy": {"max_tokens": 4}}}]});
        assert!(matches!(resolve(&mut bad, &ModelFacts::default()), Err(DirectiveError::OfflineArgs(_))));
    }

    #[test]
    fn a_prompt_id_outside_the_vocabulary_makes_the_scenario_not_apply() {
        let f = ModelFacts { vocab_size: Some(300), ..Default::default() };
        let mut v = json!({"requests": [{"request": {"prompt_token_ids": [1, 299]}},
                                        {"request": {"prompt_token_ids": [5, 345, 400]}}]});
        let res = resolve(&mut v, &f).unwrap();
        assert_eq!(res.unmet, vec!["requests[1]: prompt id 345 is outside the model's vocabulary (300)".to_string()]);
    }

    #[test]
    fn a_check_pinned_to_other_models_is_dropped_and_named() {
        let f = ModelFacts { fingerprint: Some("sha256:aa".into()), ..Default::default() };
        let mut v = json!({"checks": [
            {"check": "tokens", "is": [1], "models": ["sha256:bb"]},
            {"check": "tokens", "is": [2], "models": ["sha256:aa"]},
            {"check": "num_tokens", "is": 1}
        ]});
        let res = resolve(&mut v, &f).unwrap();
        assert_eq!(res.left_out, vec!["checks[0] tokens (pinned to other models)".to_string()]);
        assert_eq!(v["checks"].as_array().unwrap().len(), 2);
        assert_eq!(v["checks"][0]["is"], json!([2]));
    }
}
