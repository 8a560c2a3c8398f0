//! The check vocabulary as data: [`ScenarioCheck`], read with serde from a scenario
//! file's `checks` entries (docs/runner/scenarios.md "Scenarios",
//! docs/runner/tokenspeed.md "TokenSpeed scenarios", docs/runner/gateway.md
//! "Gateway scenarios"), and validated when the file loads: an unknown
//! check, a missing or mistyped field, or a check the scenario's kind does
//! not take is a [`CheckError`] naming the check.
//!
//! The JSON is the one today's scenario files carry: `{"check": NAME,
//! ...fields}`, plus the fields every check may have (`request`, `child`,
//! `engines`, `reference`, read into [`CheckSpec`]). Keys a check does not
//! know are ignored, as they always were (`oracle`, `doc` notes).

use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

use super::error::CheckError;

/// Which kind of scenario a check appears in; each kind takes its own
/// subset of the vocabulary ([`VOCABULARY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScenarioKind {
    /// vLLM replay scenarios (`golden/replay/*.json`).
    Vllm,
    /// TokenSpeed replay scenarios (`golden/replay/tokenspeed/*.json`).
    Tokenspeed,
    /// Gateway-under-test scenarios (`golden/gateway/*.json`).
    Gateway,
}

impl ScenarioKind {
    /// The kind's name in docs and errors.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioKind::Vllm => "vllm",
            ScenarioKind::Tokenspeed => "tokenspeed",
            ScenarioKind::Gateway => "gateway",
        }
    }
}

impl std::fmt::Display for ScenarioKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An expected count: a number, or `"room"` (the tokens left in the
/// context: `max_model_len` minus the prompt, as the scenario kind counts
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Count {
    /// Exactly this many.
    N(u64),
    /// The room left (`"room"`).
    Room(RoomWord),
}

/// The literal `"room"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RoomWord {
    #[serde(rename = "room")]
    Room,
}

/// An expected stop reason: a token id or a stop string.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum StopValue {
    /// A stop token id.
    Token(i64),
    /// A stop string.
    Text(String),
}

impl StopValue {
    /// As JSON (a number or a string).
    pub fn to_json(&self) -> Json {
        match self {
            StopValue::Token(t) => Json::from(*t),
            StopValue::Text(s) => Json::String(s.clone()),
        }
    }
}

/// How a request failed, by class (the `failed` check). The classes are
/// the outcomes of docs/runner/transport.md "Failure paths" that carry an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureClass {
    /// The engine finished the request with `FinishReason.ERROR`.
    ErrorOutput,
    /// The engine pushed `ENGINE_CORE_DEAD`.
    DeathSentinel,
    /// The engine's input connection dropped.
    InputDropped,
    /// The engine's output connection dropped.
    OutputDropped,
    /// The engine said HELLO again.
    Restarted,
    /// No answer within the wait or the silence deadline.
    Silence,
    /// Any other transport failure.
    Failed,
}

impl FailureClass {
    /// The class's name (the outcome name of `engine_outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::ErrorOutput => "error_output",
            FailureClass::DeathSentinel => "death_sentinel",
            FailureClass::InputDropped => "input_dropped",
            FailureClass::OutputDropped => "output_dropped",
            FailureClass::Restarted => "restarted",
            FailureClass::Silence => "silence",
            FailureClass::Failed => "failed",
        }
    }

    /// A scenario file of the earlier format names the failure by a
    /// fragment of the transport's message (`"contains"`); the fragment is
    /// read once, at load, into the class whose fixed message
    /// (docs/runner/transport.md "Failure paths") has it. `Some(None)`: any failure
    /// (the empty fragment); `None`: no class's message has it.
    pub fn from_message_fragment(fragment: &str) -> Option<Option<FailureClass>> {
        const MESSAGES: [(&str, FailureClass); 8] = [
            ("engine sent ENGINE_CORE_DEAD", FailureClass::DeathSentinel),
            ("engine's input connection dropped", FailureClass::InputDropped),
            ("engine's output connection dropped", FailureClass::OutputDropped),
            ("engine restarted", FailureClass::Restarted),
            ("(silence deadline)", FailureClass::Silence),
            ("no answer within", FailureClass::Silence),
            ("not finished within", FailureClass::Silence),
            ("engine finished the request with ERROR", FailureClass::ErrorOutput),
        ];
        if fragment.is_empty() {
            return Some(None);
        }
        let hits: Vec<FailureClass> = MESSAGES.iter().filter(|(m, _)| m.contains(fragment)).map(|(_, c)| *c).collect();
        match hits.as_slice() {
            [c] => Some(Some(*c)),
            [c, rest @ ..] if rest.iter().all(|x| x == c) => Some(Some(*c)),
            _ => None,
        }
    }
}

/// What a `sent` check compares: a dotted `path` into the request the
/// runner sent (TokenSpeed replay) or a `field` of the ADD's
/// `sampling_params` (gateway).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SentSpec {
    /// Gateway: `sampling_params.<field>` of the first ADD equals `is`,
    /// else vLLM's (as a set of integers with `as_set`).
    Field {
        field: String,
        #[serde(default, deserialize_with = "present")]
        is: Option<Json>,
        #[serde(default)]
        as_set: bool,
    },
    /// TokenSpeed replay: the value at `path` of the request sent equals
    /// `is`.
    Path {
        path: String,
        #[serde(default)]
        is: Json,
    },
}

/// What a `logprobs` check compares: vLLM's OpenAI rendering of a golden's
/// sample logprobs (gateway) or the engine's logprob columns of each row
/// (TokenSpeed replay).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum LogprobsSpec {
    /// Gateway: per position what vLLM's OpenAI server renders for the
    /// golden's `sample` with `k`.
    Rendered {
        #[serde(default)]
        k: i64,
        sample: Json,
    },
    /// TokenSpeed replay: `is: true`, one finite non-positive value per new
    /// id over the same ids; `false`, none.
    Rows {
        #[serde(default = "yes")]
        is: bool,
    },
}

fn yes() -> bool {
    true
}

/// A field whose presence matters (`"is": null` is an expected null, a
/// missing `is` is "compare with vLLM").
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Json>, D::Error> {
    Json::deserialize(d).map(Some)
}

/// One check, by name, with its own fields (docs/runner/scenarios.md,
/// tokenspeed.md and gateway.md list what each one passes on). Read from
/// `{"check": NAME, ...}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScenarioCheck {
    // ---- the client's view of one request (replay and gateway)
    /// The client's finish reason is `is` (`null`: none).
    FinishReason {
        #[serde(default)]
        is: Option<String>,
    },
    /// The client's stop reason is `is` (a token id, a string or `null`).
    StopReason {
        #[serde(default)]
        is: Option<StopValue>,
    },
    /// The client's text is `is`.
    Text { is: String },
    /// The client's text has `text`.
    TextContains { text: String },
    /// The client's text lacks `text`.
    TextNotContains { text: String },
    /// The client's token ids are `is`.
    Tokens { is: Vec<i64> },
    /// The engine's token ids are `is`.
    EngineTokens { is: Vec<i64> },
    /// The client got `is` tokens.
    NumTokens { is: Count },
    /// Every copy of every named request got the same engine tokens.
    SameTokens { requests: Vec<String> },
    /// Copy i of the first request got the same tokens as copy i of the
    /// second.
    SameTokensPairwise { requests: [String; 2] },
    /// The named requests' engine tokens differ (vLLM: copy by copy of
    /// two requests; TokenSpeed: each from the next).
    DifferentTokens { requests: Vec<String> },
    /// None of `tokens` among the first `n` engine tokens.
    NoTokenInFirst { n: u64, tokens: Vec<i64> },
    /// The gateway refused the request (`class`: the translation error
    /// class).
    Refused {
        #[serde(default)]
        class: Option<String>,
    },
    /// The gateway sent an ABORT and nothing arrived later than
    /// `settle_ms` after it.
    SilentAfterAbort {
        #[serde(default)]
        settle_ms: Option<u64>,
    },
    /// The request ended with outcome `is` (vLLM replay).
    EngineOutcome { is: String },
    /// The request ended with outcome `is` (TokenSpeed replay).
    Outcome { is: String },
    /// A value of what was sent to the engine.
    Sent(SentSpec),
    /// Logprobs (see [`LogprobsSpec`]).
    Logprobs(LogprobsSpec),

    // ---- vLLM replay
    /// No child got more engine tokens than the `max_tokens` sent
    /// (`exact`: exactly that many).
    MaxTokensHonoured {
        #[serde(default)]
        exact: bool,
    },
    /// The gateway sent `max_tokens` = `is`.
    SentMaxTokens { is: Count },
    /// Every output's `new_logprobs` has `is` columns.
    LogprobsColumns { is: i64 },
    /// Sample logprobs' rows, columns, ranks and shaping for the client's
    /// `k`.
    SampleLogprobs { k: i64 },
    /// Prompt logprobs' rows, columns, ranks and shaping for `k`.
    PromptLogprobs { k: i64 },
    /// Some output carries prompt logprobs.
    PromptLogprobsPresent {},
    /// The client text is in the language of the request's structured
    /// output constraint (a grammar's as `language_regex`).
    SatisfiesConstraint {
        #[serde(default)]
        language_regex: Option<String>,
    },
    /// `n` fan-out: the number of engine requests.
    NumChildren { is: u64 },
    /// `n` fan-out: the seed each child was sent.
    ChildSeeds { is: Vec<Option<i64>> },
    /// `n` fan-out: the children's engine request ids all differ.
    DistinctChildIds {},
    /// The request failed, of class `class` (any class when absent).
    Failed {
        #[serde(default)]
        class: Option<FailureClass>,
        /// The earlier format's message fragment, read into `class` at
        /// load ([`FailureClass::from_message_fragment`]).
        #[serde(default)]
        contains: Option<String>,
    },
    /// The request ended with a local abort.
    Aborted {},
    /// Utility call `call` returned `is`.
    UtilityResult {
        call: String,
        #[serde(default)]
        is: Json,
    },
    /// The engine refused utility call `call` with a message that has
    /// `contains` (the engine's own reply).
    UtilityFailure {
        call: String,
        #[serde(default)]
        contains: String,
    },
    /// Every request finished.
    AllFinished {},
    /// Every engine request of the request went to engine (data-parallel
    /// rank) `engine`, and the batches that carried its outputs said
    /// `engine_index` `engine`; no batch of the scenario named an engine
    /// other than its connection's.
    ServedBy { engine: u16 },
    /// The data-parallel wave messages of the scenario, in any order: each
    /// `{"engine": E, "wave_complete": W}` or `{"engine": E, "start_wave": W}`
    /// (`[]`: none, as on a dense model's independent ranks).
    DpControl { is: Vec<Json> },

    // ---- TokenSpeed replay
    /// Exactly one row: abort, no ids, completion 0.
    TerminalAbortRow {},
    /// No row within the request's wait.
    Silence {},
    /// The number of rows.
    Rows { is: u64 },
    /// `completion_tokens` of each row.
    RowCompletions { is: Vec<i64> },
    /// Cumulative counts on every row.
    Counts {},

    // ---- gateway under test
    /// The HTTP status is `is`.
    Status { is: u16 },
    /// `usage.completion_tokens` is `is`.
    CompletionTokens { is: Count },
    /// `usage.prompt_tokens` is the prompt length the ADD carried.
    PromptTokens {},
    /// Chat: each entry's token text is vLLM's `decoded_token`.
    LogprobTokens {
        #[serde(default)]
        k: i64,
        sample: Json,
    },
    /// The ADD's stop ids cover vLLM's; extras only with the same effect.
    SentStopTokenIds {},
    /// One constraint, a `_backend`, the constraint vLLM sends.
    SentStructuredOutputs {},
    /// `n` fan-out: the children's seeds equal vLLM's.
    SentSeeds {},
    /// An error status (`status`, else any >= 400) with an `error` object.
    ErrorResponse {
        #[serde(default)]
        status: Option<u64>,
    },
    /// A response within `s` seconds.
    WithinS { s: f64 },
    /// No success within `s` seconds.
    FailsWithin { s: f64 },
    /// The body's value at `path` is `is` (numbers within 1e-6 relative).
    Json {
        path: String,
        #[serde(default)]
        is: Json,
    },
    /// An event stream ending in the one `[DONE]`.
    SseDone {},
    /// The number of ADDs.
    NumAdds { is: u64 },
    /// Every engine request ABORTed within `grace_ms`, or stopped by the
    /// engine itself by vLLM's stop point `tokens`.
    EngineAborted {
        #[serde(default)]
        tokens: Option<u64>,
    },
    /// Every engine request ran to the engine's own finish: no ABORT (a
    /// slow client is still a client).
    EngineFinished {},
    /// After an engine came back: the request succeeds (2xx), or the
    /// gateway is gone (exited, nothing listening) so that its supervisor
    /// restarts it; an alive gateway that fails or hangs is neither.
    ServesOrExits {},

    // ---- gateway lifecycle steps
    /// A probe of a health or readiness route: `is` true, HTTP 200; false,
    /// anything else (an error status, nothing listening, no answer).
    Healthy { is: bool },
    /// The gateway stopped by SIGTERM: every process of it gone within `s`
    /// seconds.
    ExitsWithin { s: f64 },
    /// After the gateway stopped: no Unix socket file left in its
    /// directories (its `TMPDIR` and the `ipc://` paths it was given).
    NoSocketFiles {},
}

/// One row of the vocabulary: a check's name, the scenario kinds that take
/// it, and its fields as docs/runner/scenarios.md "Check vocabulary" lists them.
#[derive(Debug, Clone, Copy)]
pub struct VocabularyEntry {
    pub name: &'static str,
    pub kinds: &'static [ScenarioKind],
    pub fields: &'static str,
}

use ScenarioKind::{Gateway as G, Tokenspeed as T, Vllm as V};

/// Every check, the kinds that take it and its fields. The source of the
/// vocabulary table in docs/runner/scenarios.md ([`vocabulary_markdown`]); a test
/// holds it to [`ScenarioCheck`].
pub const VOCABULARY: &[VocabularyEntry] = &[
    VocabularyEntry { name: "finish_reason", kinds: &[V, T, G], fields: "`is` (string or null)" },
    VocabularyEntry { name: "stop_reason", kinds: &[V, T, G], fields: "`is` (token id, string or null)" },
    VocabularyEntry { name: "text", kinds: &[V, T, G], fields: "`is` (string)" },
    VocabularyEntry { name: "text_contains", kinds: &[V, T], fields: "`text`" },
    VocabularyEntry { name: "text_not_contains", kinds: &[V, T], fields: "`text`" },
    VocabularyEntry { name: "tokens", kinds: &[V, T], fields: "`is` (token ids)" },
    VocabularyEntry { name: "engine_tokens", kinds: &[T], fields: "`is` (token ids)" },
    VocabularyEntry { name: "num_tokens", kinds: &[V, T], fields: "`is` (count or `\"room\"`)" },
    VocabularyEntry { name: "same_tokens", kinds: &[V, T], fields: "`requests`" },
    VocabularyEntry { name: "same_tokens_pairwise", kinds: &[V], fields: "`requests` (two)" },
    VocabularyEntry { name: "different_tokens", kinds: &[V, T], fields: "`requests` (vLLM: two)" },
    VocabularyEntry { name: "no_token_in_first", kinds: &[V, T], fields: "`n`, `tokens`" },
    VocabularyEntry { name: "refused", kinds: &[V, T], fields: "optional `class`" },
    VocabularyEntry { name: "silent_after_abort", kinds: &[V, T], fields: "`settle_ms` (TokenSpeed: default 100)" },
    VocabularyEntry { name: "engine_outcome", kinds: &[V], fields: "`is` (an outcome)" },
    VocabularyEntry { name: "outcome", kinds: &[T], fields: "`is` (an outcome)" },
    VocabularyEntry {
        name: "sent",
        kinds: &[T, G],
        fields: "TokenSpeed: `path`, `is`; gateway: `field`, optional `is`, `as_set`",
    },
    VocabularyEntry {
        name: "logprobs",
        kinds: &[T, G],
        fields: "TokenSpeed: `is` (bool, default true); gateway: `k`, `sample`",
    },
    VocabularyEntry { name: "max_tokens_honoured", kinds: &[V], fields: "optional `exact`" },
    VocabularyEntry { name: "sent_max_tokens", kinds: &[V], fields: "`is` (count or `\"room\"`)" },
    VocabularyEntry { name: "logprobs_columns", kinds: &[V], fields: "`is`" },
    VocabularyEntry { name: "sample_logprobs", kinds: &[V], fields: "`k`" },
    VocabularyEntry { name: "prompt_logprobs", kinds: &[V], fields: "`k`" },
    VocabularyEntry { name: "prompt_logprobs_present", kinds: &[V], fields: "" },
    VocabularyEntry { name: "satisfies_constraint", kinds: &[V], fields: "optional `language_regex`" },
    VocabularyEntry { name: "num_children", kinds: &[V], fields: "`is`" },
    VocabularyEntry { name: "child_seeds", kinds: &[V], fields: "`is` (seeds or null)" },
    VocabularyEntry { name: "distinct_child_ids", kinds: &[V], fields: "" },
    VocabularyEntry { name: "failed", kinds: &[V], fields: "optional `class` (a failure outcome)" },
    VocabularyEntry { name: "aborted", kinds: &[V], fields: "" },
    VocabularyEntry { name: "utility_result", kinds: &[V], fields: "`call`, `is`" },
    VocabularyEntry { name: "utility_failure", kinds: &[V], fields: "`call`, `contains`" },
    VocabularyEntry { name: "all_finished", kinds: &[V], fields: "" },
    VocabularyEntry { name: "served_by", kinds: &[V], fields: "`engine` (a data-parallel rank)" },
    VocabularyEntry { name: "dp_control", kinds: &[V], fields: "`is` (wave messages, `[]` for none)" },
    VocabularyEntry { name: "terminal_abort_row", kinds: &[T], fields: "" },
    VocabularyEntry { name: "silence", kinds: &[T], fields: "" },
    VocabularyEntry { name: "rows", kinds: &[T], fields: "`is`" },
    VocabularyEntry { name: "row_completions", kinds: &[T], fields: "`is`" },
    VocabularyEntry { name: "counts", kinds: &[T], fields: "" },
    VocabularyEntry { name: "status", kinds: &[G], fields: "`is`" },
    VocabularyEntry { name: "completion_tokens", kinds: &[G], fields: "`is` (count or `\"room\"`)" },
    VocabularyEntry { name: "prompt_tokens", kinds: &[G], fields: "" },
    VocabularyEntry { name: "logprob_tokens", kinds: &[G], fields: "`k`, `sample`" },
    VocabularyEntry { name: "sent_stop_token_ids", kinds: &[G], fields: "" },
    VocabularyEntry { name: "sent_structured_outputs", kinds: &[G], fields: "" },
    VocabularyEntry { name: "sent_seeds", kinds: &[G], fields: "" },
    VocabularyEntry { name: "error_response", kinds: &[G], fields: "optional `status`" },
    VocabularyEntry { name: "within_s", kinds: &[G], fields: "`s`" },
    VocabularyEntry { name: "fails_within", kinds: &[G], fields: "`s`" },
    VocabularyEntry { name: "json", kinds: &[G], fields: "`path`, `is`" },
    VocabularyEntry { name: "sse_done", kinds: &[G], fields: "" },
    VocabularyEntry { name: "num_adds", kinds: &[G], fields: "`is`" },
    VocabularyEntry { name: "engine_aborted", kinds: &[G], fields: "optional `tokens`" },
    VocabularyEntry { name: "engine_finished", kinds: &[G], fields: "" },
    VocabularyEntry { name: "serves_or_exits", kinds: &[G], fields: "" },
    VocabularyEntry { name: "healthy", kinds: &[G], fields: "`is` (bool; probes only)" },
    VocabularyEntry { name: "exits_within", kinds: &[G], fields: "`s` (`stop_gateway` only)" },
    VocabularyEntry { name: "no_socket_files", kinds: &[G], fields: "(`stop_gateway` only)" },
];

/// The vocabulary as the markdown table of docs/runner/scenarios.md "Check
/// vocabulary" (check, kinds, fields).
pub fn vocabulary_markdown() -> String {
    let mut s = String::from("| check | vllm | tokenspeed | gateway | fields |\n| --- | --- | --- | --- | --- |\n");
    for e in VOCABULARY {
        let mark = |k: ScenarioKind| if e.kinds.contains(&k) { "yes" } else { "" };
        s.push_str(&format!("| `{}` | {} | {} | {} | {} |\n", e.name, mark(V), mark(T), mark(G), e.fields));
    }
    s
}

impl ScenarioCheck {
    /// The vLLM engine-message fields (`Struct.field`) this check reads, so
    /// that a run on a release whose table lacks one reports the scenario
    /// as not applicable instead of failing it
    /// ([`crate::scenario::release_gaps::gaps`]).
    pub fn wire_fields(&self) -> &'static [&'static str] {
        match self {
            ScenarioCheck::StopReason { .. } => &["EngineCoreOutput.stop_reason"],
            ScenarioCheck::LogprobsColumns { .. } | ScenarioCheck::SampleLogprobs { .. } => {
                &["EngineCoreOutput.new_logprobs"]
            }
            ScenarioCheck::PromptLogprobs { .. } | ScenarioCheck::PromptLogprobsPresent {} => {
                &["EngineCoreOutput.new_prompt_logprobs_tensors"]
            }
            ScenarioCheck::ChildSeeds { .. } => &["SamplingParams.seed"],
            ScenarioCheck::UtilityResult { .. } | ScenarioCheck::UtilityFailure { .. } => {
                &["EngineCoreOutputs.utility_output"]
            }
            ScenarioCheck::ServedBy { .. } => {
                &["EngineCoreOutputs.engine_index", "EngineCoreRequest.data_parallel_rank"]
            }
            ScenarioCheck::DpControl { .. } => &["EngineCoreOutputs.wave_complete", "EngineCoreOutputs.start_wave"],
            _ => &[],
        }
    }

    /// The check's name, as scenario files write it.
    pub fn name(&self) -> &'static str {
        match self {
            ScenarioCheck::FinishReason { .. } => "finish_reason",
            ScenarioCheck::StopReason { .. } => "stop_reason",
            ScenarioCheck::Text { .. } => "text",
            ScenarioCheck::TextContains { .. } => "text_contains",
            ScenarioCheck::TextNotContains { .. } => "text_not_contains",
            ScenarioCheck::Tokens { .. } => "tokens",
            ScenarioCheck::EngineTokens { .. } => "engine_tokens",
            ScenarioCheck::NumTokens { .. } => "num_tokens",
            ScenarioCheck::SameTokens { .. } => "same_tokens",
            ScenarioCheck::SameTokensPairwise { .. } => "same_tokens_pairwise",
            ScenarioCheck::DifferentTokens { .. } => "different_tokens",
            ScenarioCheck::NoTokenInFirst { .. } => "no_token_in_first",
            ScenarioCheck::Refused { .. } => "refused",
            ScenarioCheck::SilentAfterAbort { .. } => "silent_after_abort",
            ScenarioCheck::EngineOutcome { .. } => "engine_outcome",
            ScenarioCheck::Outcome { .. } => "outcome",
            ScenarioCheck::Sent(_) => "sent",
            ScenarioCheck::Logprobs(_) => "logprobs",
            ScenarioCheck::MaxTokensHonoured { .. } => "max_tokens_honoured",
            ScenarioCheck::SentMaxTokens { .. } => "sent_max_tokens",
            ScenarioCheck::LogprobsColumns { .. } => "logprobs_columns",
            ScenarioCheck::SampleLogprobs { .. } => "sample_logprobs",
            ScenarioCheck::PromptLogprobs { .. } => "prompt_logprobs",
            ScenarioCheck::PromptLogprobsPresent {} => "prompt_logprobs_present",
            ScenarioCheck::SatisfiesConstraint { .. } => "satisfies_constraint",
            ScenarioCheck::NumChildren { .. } => "num_children",
            ScenarioCheck::ChildSeeds { .. } => "child_seeds",
            ScenarioCheck::DistinctChildIds {} => "distinct_child_ids",
            ScenarioCheck::Failed { .. } => "failed",
            ScenarioCheck::Aborted {} => "aborted",
            ScenarioCheck::UtilityResult { .. } => "utility_result",
            ScenarioCheck::UtilityFailure { .. } => "utility_failure",
            ScenarioCheck::AllFinished {} => "all_finished",
            ScenarioCheck::ServedBy { .. } => "served_by",
            ScenarioCheck::DpControl { .. } => "dp_control",
            ScenarioCheck::TerminalAbortRow {} => "terminal_abort_row",
            ScenarioCheck::Silence {} => "silence",
            ScenarioCheck::Rows { .. } => "rows",
            ScenarioCheck::RowCompletions { .. } => "row_completions",
            ScenarioCheck::Counts {} => "counts",
            ScenarioCheck::Status { .. } => "status",
            ScenarioCheck::CompletionTokens { .. } => "completion_tokens",
            ScenarioCheck::PromptTokens {} => "prompt_tokens",
            ScenarioCheck::LogprobTokens { .. } => "logprob_tokens",
            ScenarioCheck::SentStopTokenIds {} => "sent_stop_token_ids",
            ScenarioCheck::SentStructuredOutputs {} => "sent_structured_outputs",
            ScenarioCheck::SentSeeds {} => "sent_seeds",
            ScenarioCheck::ErrorResponse { .. } => "error_response",
            ScenarioCheck::WithinS { .. } => "within_s",
            ScenarioCheck::FailsWithin { .. } => "fails_within",
            ScenarioCheck::Json { .. } => "json",
            ScenarioCheck::SseDone {} => "sse_done",
            ScenarioCheck::NumAdds { .. } => "num_adds",
            ScenarioCheck::EngineAborted { .. } => "engine_aborted",
            ScenarioCheck::EngineFinished {} => "engine_finished",
            ScenarioCheck::ServesOrExits {} => "serves_or_exits",
            ScenarioCheck::Healthy { .. } => "healthy",
            ScenarioCheck::ExitsWithin { .. } => "exits_within",
            ScenarioCheck::NoSocketFiles {} => "no_socket_files",
        }
    }

    /// Validates the check for a scenario of `kind` and normalises the
    /// earlier format's fields (`failed.contains`).
    fn validate(mut self, kind: ScenarioKind) -> Result<ScenarioCheck, CheckError> {
        let name = self.name();
        let entry = VOCABULARY.iter().find(|e| e.name == name);
        let form_ok = match (&self, kind) {
            (ScenarioCheck::Sent(SentSpec::Field { .. }), ScenarioKind::Gateway) => true,
            (ScenarioCheck::Sent(SentSpec::Path { .. }), ScenarioKind::Tokenspeed) => true,
            (ScenarioCheck::Sent(_), _) => false,
            (ScenarioCheck::Logprobs(LogprobsSpec::Rendered { .. }), ScenarioKind::Gateway) => true,
            (ScenarioCheck::Logprobs(LogprobsSpec::Rows { .. }), ScenarioKind::Tokenspeed) => true,
            (ScenarioCheck::Logprobs(_), _) => false,
            _ => true,
        };
        if !form_ok || !entry.is_some_and(|e| e.kinds.contains(&kind)) {
            return Err(CheckError::NotForKind { check: name, kind });
        }
        let missing = |field: &'static str| CheckError::MissingField { check: name, field };
        match &mut self {
            ScenarioCheck::DifferentTokens { requests } if kind == ScenarioKind::Vllm && requests.len() != 2 => {
                return Err(CheckError::Invalid { check: name, why: "`requests` must name two requests".into() });
            }
            ScenarioCheck::SilentAfterAbort { settle_ms: None } if kind == ScenarioKind::Vllm => {
                return Err(missing("settle_ms"));
            }
            ScenarioCheck::EngineOutcome { is } if !REPLAY_OUTCOMES.contains(&is.as_str()) => {
                return Err(CheckError::Invalid { check: name, why: format!("`is`: no outcome {is:?}") });
            }
            ScenarioCheck::Outcome { is } if !TOKENSPEED_OUTCOMES.contains(&is.as_str()) => {
                return Err(CheckError::Invalid { check: name, why: format!("`is`: no outcome {is:?}") });
            }
            ScenarioCheck::SatisfiesConstraint { language_regex: Some(re) } => {
                super::constraint::full_match_regex(re)
                    .map_err(|e| CheckError::Invalid { check: name, why: format!("`language_regex`: {e}") })?;
            }
            ScenarioCheck::Failed { class, contains } => {
                if let (None, Some(text)) = (&class, contains.take()) {
                    *class = FailureClass::from_message_fragment(&text).ok_or_else(|| CheckError::Invalid {
                        check: name,
                        why: format!("`contains` {text:?} names no failure class; give `class` instead"),
                    })?;
                }
            }
            _ => {}
        }
        Ok(self)
    }
}

/// The outcomes `engine_outcome` may expect (vLLM replay).
pub const REPLAY_OUTCOMES: &[&str] = &[
    "none",
    "finished",
    "error_output",
    "aborted",
    "death_sentinel",
    "input_dropped",
    "output_dropped",
    "restarted",
    "silence",
    "failed",
];

/// The outcomes `outcome` may expect (TokenSpeed replay).
pub const TOKENSPEED_OUTCOMES: &[&str] =
    &["none", "finished", "abort_row", "aborted", "refused", "silence", "death_sentinel", "failed"];

/// A check with the fields every check may carry.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    pub check: ScenarioCheck,
    /// The request it is about (replay: a request id; gateway: unused).
    pub request: Option<String>,
    /// Which child of an `n` fan-out (vLLM replay; default 0).
    pub child: usize,
    /// Only on these engines (replay).
    pub engines: Option<Vec<String>>,
    /// Where the expected value comes from (gateway reports).
    pub reference: Option<String>,
}

impl CheckSpec {
    /// Reads and validates one entry of a scenario's `checks` for a
    /// scenario of `kind`.
    pub fn parse(kind: ScenarioKind, v: &Json) -> Result<CheckSpec, CheckError> {
        let o = v.as_object().ok_or(CheckError::NotAnObject)?;
        let name = match o.get("check") {
            None => return Err(CheckError::NoName),
            Some(Json::String(s)) => s.as_str(),
            Some(_) => return Err(CheckError::NoName),
        };
        if !VOCABULARY.iter().any(|e| e.name == name) {
            return Err(CheckError::Unknown { name: name.to_string() });
        }
        let check: ScenarioCheck = serde_json::from_value(v.clone())
            .map_err(|e| CheckError::Field { check: name.to_string(), message: e.to_string() })?;
        let check = check.validate(kind)?;
        let engines = match o.get("engines") {
            None | Some(Json::Null) => None,
            Some(Json::Array(a)) => Some(a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()),
            Some(_) => {
                return Err(CheckError::Field { check: name.into(), message: "`engines` must be a list".into() })
            }
        };
        Ok(CheckSpec {
            check,
            request: o.get("request").and_then(Json::as_str).map(str::to_string),
            child: o.get("child").and_then(Json::as_u64).unwrap_or(0) as usize,
            engines,
            reference: o.get("reference").and_then(Json::as_str).map(str::to_string),
        })
    }

    /// The check's name.
    pub fn name(&self) -> &'static str {
        self.check.name()
    }

    /// Whether it applies on `engine` (its `engines`, if any, name it).
    pub fn applies_on(&self, engine: &str) -> bool {
        self.engines.as_ref().is_none_or(|e| e.iter().any(|x| x == engine))
    }

    /// `reference`, or `""`.
    pub fn reference(&self) -> &str {
        self.reference.as_deref().unwrap_or("")
    }
}

/// Reads a scenario's `checks` list (absent or null: none); an error
/// comes with the index of the entry it is about.
pub fn parse_list(kind: ScenarioKind, v: Option<&Json>) -> Result<Vec<CheckSpec>, (usize, CheckError)> {
    let list = match v {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(a)) => a,
        Some(_) => return Err((0, CheckError::NotAList)),
    };
    list.iter().enumerate().map(|(i, c)| CheckSpec::parse(kind, c).map_err(|e| (i, e))).collect()
}
