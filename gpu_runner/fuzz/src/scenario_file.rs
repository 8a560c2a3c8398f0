//! `scenario_file`: one file's bytes through the scenario loader of every
//! kind (`gpu_runner::load::parse_file`, what `load_dir` does with each
//! file once read; docs/limits.md "Files the suite reads"):
//!
//! - vLLM replay (`golden/replay/*.json`, `dp/`), with no model facts and
//!   with the tiny model's (its `$model.*` directives resolved);
//! - TokenSpeed replay (`golden/replay/tokenspeed/`);
//! - gateway (`golden/gateway/*.json`), with the golden tree of this
//!   checkout for `from_golden` and the tiny tokenizer;
//! - end to end (`golden/gateway/e2e/`).
//!
//! Bytes that are not UTF-8 stop here: `untrusted::read_text` refuses
//! them before any parser sees them. Checked beyond "no panic" and a
//! typed error that names the file:
//! - text nested deeper than `MAX_JSON_DEPTH` is refused as too deep by
//!   every loader, before parsing, and nothing deeper is accepted;
//! - an accepted scenario's name is one plain path component, checked by
//!   the rules written out here ([`plain_component`]) and by `std::path`:
//!   it joins onto a directory as exactly one normal component;
//! - a replay scenario's request ids are distinct, and its `after` levels
//!   (`replay::model::levels`) hold every request once, each after one of
//!   an earlier level;
//! - a gateway scenario's `from_golden` names are relative paths of plain
//!   components, so the case file read lies inside the golden tree.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use engine_protocol::translate::GatewayTokenizer;
use engine_testkit::model::ModelDir;
use gpu_runner::gateway::e2e::E2eScenario;
use gpu_runner::gateway::{GatewayLoad, GwScenario};
use gpu_runner::load::{parse_file, LoadError, ScenarioFile};
use gpu_runner::model_facts::ModelFacts;
use gpu_runner::scenario::{levels, DialectFields, ScenarioOf};
use gpu_runner::untrusted::{check_json_depth, Refused, MAX_JSON_DEPTH, MAX_NAME_BYTES};

/// The file name every input is loaded as.
pub const FILE: &str = "fuzz_input.json";

/// The golden tree `from_golden` reads in: this checkout's (compiled in;
/// where the binary runs without it, every `from_golden` is a read error).
pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../golden")
}

/// The tiny model's tokenizer, embedded so that the binary needs no
/// checkout to decode prompts.
pub fn tokenizer() -> &'static GatewayTokenizer {
    static T: OnceLock<GatewayTokenizer> = OnceLock::new();
    T.get_or_init(|| ModelDir::tiny_embedded().tokenizer().expect("the committed tiny tokenizer loads"))
}

/// The tiny model's facts (`$model.*` directives resolve against them).
pub fn tiny_facts() -> &'static ModelFacts {
    static F: OnceLock<ModelFacts> = OnceLock::new();
    F.get_or_init(|| ModelFacts::of(tokenizer(), None))
}

/// Whether `name` is one plain path component, by the rules of
/// docs/limits.md written out again (not `untrusted::path_component`).
pub fn plain_component(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.chars().any(char::is_control)
        && name.len() <= MAX_NAME_BYTES
        && {
            let joined = Path::new("record").join(name);
            let parts: Vec<Component<'_>> = joined.components().collect();
            parts.len() == 2 && parts[1] == Component::Normal(name.as_ref())
        }
}

/// The checks every loader's result gets; `accepted` checks what is
/// particular to the kind.
fn judge<S: ScenarioFile<C>, C: ?Sized>(text: &str, ctx: &C, deep: bool, accepted: impl FnOnce(&S)) {
    match parse_file::<S, C>(Path::new(FILE), text, ctx) {
        Ok(s) => {
            assert!(!deep, "text nested deeper than {MAX_JSON_DEPTH} levels was accepted");
            assert!(plain_component(s.name()), "an accepted scenario is named {:?}", s.name());
            accepted(&s);
        }
        Err(e) => {
            if deep {
                assert!(
                    matches!(e, LoadError::Refused { error: Refused::TooDeep { limit: MAX_JSON_DEPTH, .. }, .. }),
                    "text too deep refused otherwise: {e}"
                );
            }
            assert_eq!(e.file(), Some(Path::new(FILE)), "the error names no file: {e}");
            let _ = e.to_string();
        }
    }
}

/// The replay checks of both dialects.
fn replay<D: DialectFields>(s: &ScenarioOf<D>) {
    for (i, r) in s.requests.iter().enumerate() {
        assert!(!s.requests[..i].iter().any(|q| q.id == r.id), "two requests with id {:?}", r.id);
    }
    let levels = levels(&s.requests).expect("an accepted scenario has no `after` cycle");
    let mut level_of = vec![None; s.requests.len()];
    for (l, level) in levels.iter().enumerate() {
        for &i in level {
            assert!(level_of[i].replace(l).is_none(), "request {i} in two levels");
        }
    }
    for (i, r) in s.requests.iter().enumerate() {
        let l = level_of[i].expect("every request has a level");
        match &r.after {
            None => assert_eq!(l, 0, "request {:?} waits for nothing but is at level {l}", r.id),
            Some(a) => {
                let j = s.requests.iter().position(|q| &q.id == a).expect("`after` names a request");
                assert_eq!(level_of[j].map(|k| k + 1), Some(l), "request {:?} is not one level after {a:?}", r.id);
            }
        }
    }
}

/// The gateway checks: `from_golden` stays inside the golden tree.
fn gateway(s: &GwScenario) {
    for r in s.requests() {
        if let Some(g) = &r.golden {
            assert!(g.split('/').all(plain_component), "from_golden {g:?} accepted");
        }
    }
}

/// Every check of this target on one input.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let deep = check_json_depth(text, MAX_JSON_DEPTH).is_err();
    let none = ModelFacts::default();
    judge::<gpu_runner::scenario::Scenario, _>(text, &none, deep, replay);
    judge::<gpu_runner::scenario::Scenario, _>(text, tiny_facts(), deep, replay);
    judge::<gpu_runner::scenario::tokenspeed::Scenario, _>(text, &none, deep, replay);
    let golden = golden_dir();
    let load = GatewayLoad { golden: &golden, tokenizer: tokenizer() };
    judge::<GwScenario, _>(text, &load, deep, gateway);
    judge::<E2eScenario, _>(text, &(), deep, |_| {});
}
