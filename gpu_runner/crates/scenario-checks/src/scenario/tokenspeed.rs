//! TokenSpeed replay scenarios: the scenario model's TokenSpeed fields and
//! the type of a run's results (the run itself is `engine_replay::replay::run`,
//! TokenSpeed's part of it `engine_replay::dialect::tokenspeed`: requests
//! translated to `TokenizedGenerateReqInput`, the rows accumulated per rid
//! and run through the gateway's stop-string detection; docs/runner/tokenspeed.md
//! "TokenSpeed scenarios").
//!
//! Wire facts the checks rely on (docs/tokenspeed-wire.md §5, §7;
//! TokenSpeed 0.1.1 `generation_output_processor.py`):
//!
//! - `output_ids` are deltas, `prompt_tokens` / `completion_tokens` are
//!   cumulative and repeated on every row; the finish string is `""` until
//!   the terminal row, then `stop`, `length` or `abort`, and it carries no
//!   matched token or string;
//! - a request the receive path refuses gets exactly one row: `"abort"`,
//!   no ids, completion 0; an ADD that does not decode gets nothing;
//! - a client ABORT gets no row;
//! - with `return_logprob`, each row carries one f64 logprob and one id per
//!   new id (the sampled token only).
//!
//! Scenario files (`golden/replay/tokenspeed/*.json`) use the vLLM
//! scenario's model ([`crate::scenario`]) and the shared check
//! vocabulary ([`crate::check`]) for [`ScenarioKind::Tokenspeed`]; the
//! checks are listed in docs/runner/scenarios.md "Check vocabulary".

use std::path::Path;

use serde_json::Value as Json;

use crate::check::ScenarioKind;
use crate::load::{LoadError, ScenarioError};
use crate::scenario::{load_dir_of, DialectFields, RequestSpecOf, ScenarioOf};

/// The TokenSpeed dialect of the shared scenario model
/// ([`crate::scenario::ScenarioOf`]): the header, request specs, `after`
/// levels and raw requests are the vLLM scenario's; `raw.set` paths point
/// into the `TokenizedGenerateReqInput`.
pub use engine_client::dialect::Tokenspeed;

/// TokenSpeed's own request-spec fields.
#[derive(Debug, Clone)]
pub struct RequestFields {
    /// `TokenizedGenerateReqInput.stream`.
    pub stream: bool,
}

/// TokenSpeed's own scenario fields.
#[derive(Debug, Clone, Default)]
pub struct ScenarioFields {
    /// The mock's script for a fresh mock engine (docs/runner/tokenspeed.md
    /// "The TokenSpeed mock").
    pub mock: Option<Json>,
}

/// A TokenSpeed scenario.
pub type Scenario = ScenarioOf<Tokenspeed>;
/// One request of a TokenSpeed scenario.
pub type RequestSpec = RequestSpecOf<Tokenspeed>;

impl DialectFields for Tokenspeed {
    type Request = RequestFields;
    type Scenario = ScenarioFields;
    const KIND: ScenarioKind = ScenarioKind::Tokenspeed;
    const EMPTY: &'static str = "no requests";

    fn request(r: &Json, at: &str) -> Result<RequestFields, ScenarioError> {
        let stream = match r.get("stream") {
            None => false,
            Some(b) => b.as_bool().ok_or_else(|| format!("{at}.stream: expected a bool, got {b}"))?,
        };
        Ok(RequestFields { stream })
    }

    fn scenario(o: &serde_json::Map<String, Json>, _name: &str) -> Result<ScenarioFields, ScenarioError> {
        Ok(ScenarioFields { mock: o.get("mock").cloned() })
    }
}

/// Every `*.json` scenario in `dir`, in name order (TokenSpeed scenarios
/// name no model facts: they are read for no model in particular).
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, LoadError> {
    load_dir_of::<Tokenspeed>(dir, &crate::model_facts::ModelFacts::default())
}
