//! Lifecycle steps of a gateway scenario, observed and judged: probes of
//! the health and readiness routes, the engine registering again, the
//! gateway stopped by SIGTERM, and the request checks that only make sense
//! around them (docs/runner/gateway.md "Gateway lifecycle").
//!
//! Facts relied on:
//!
//! - a process that exited leaves its Unix socket files behind unless it
//!   unlinks them itself (ZeroMQ's `ipc://` binds create one per address;
//!   libzmq removes it on a clean close, a killed process cannot); Python's
//!   `tempfile` (and so vLLM's default `ipc://` paths,
//!   `vllm/utils/network_utils.py` `get_open_zmq_ipc_path`, under
//!   `VLLM_RPC_BASE_PATH` = `tempfile.gettempdir()`) follows `TMPDIR`, which
//!   the launchers point into the gateway's own directory;
//! - HTTP 200 is "healthy" on every route probed (vLLM's `/health`, SMG's
//!   `/health`, `/readiness`); anything else, including nothing listening,
//!   is not.

use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use super::checks::CheckResult;
use super::observe::{NoResponse, Observed};
use super::scenario::{GwAction, GwProbe};
use scenario_checks::check::ScenarioCheck;

/// What a probe got.
#[derive(Debug, Clone, Default)]
pub struct ProbeObserved {
    pub path: String,
    pub status: Option<u16>,
    pub error: Option<NoResponse>,
    /// The body's start (300 characters).
    pub body_start: String,
    pub seconds: f64,
}

impl ProbeObserved {
    /// In words: `HTTP 503 {...}` or why there was no answer.
    pub fn answer(&self) -> String {
        match (self.status, &self.error) {
            (Some(s), _) => format!("HTTP {s} {}", self.body_start.trim()).trim_end().to_string(),
            (None, Some(e)) => format!("no answer: {e}"),
            (None, None) => "no answer".into(),
        }
    }

    /// As the report lists it.
    pub fn report(&self, id: &str) -> Json {
        json!({"id": id, "probe": self.path, "status": self.status,
               "error": self.error.as_ref().map(ToString::to_string), "response": self.body_start, "seconds": self.seconds})
    }
}

/// What an action did.
#[derive(Debug, Clone, Default)]
pub struct ActionObserved {
    /// It completed (register: INIT received; stop: every process gone
    /// within the limit).
    pub ok: bool,
    pub seconds: f64,
    pub detail: String,
    /// Stop: the socket files left behind in the gateway's directories.
    pub socket_files: Vec<PathBuf>,
    /// Stop: where they were looked for.
    pub searched: Vec<PathBuf>,
}

impl ActionObserved {
    /// As the report lists it (paths relative to the gateway's directory
    /// when inside it).
    pub fn report(&self, id: &str, action: &str) -> Json {
        json!({"id": id, "action": action, "ok": self.ok, "seconds": self.seconds, "detail": self.detail,
               "socket_files": self.socket_files.iter().map(|p| short_path(p, &self.searched)).collect::<Vec<_>>()})
    }
}

fn short_path(p: &Path, roots: &[PathBuf]) -> String {
    roots
        .iter()
        .find_map(|r| p.strip_prefix(r).ok().map(|rel| format!("<gateway dir>/{}", rel.display())))
        .unwrap_or_else(|| p.display().to_string())
}

/// Unix socket files under `dirs` (recursively; unreadable entries are
/// skipped, a missing directory has none).
pub fn socket_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    // Bounded: a gateway directory is small; a link loop cannot recur
    // because symlinks are not followed.
    let mut seen = 0usize;
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            seen += 1;
            if seen > 100_000 {
                return out;
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_socket() {
                out.push(e.path());
            } else if t.is_dir() {
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The checks of a probe.
pub fn check_probe(p: &GwProbe, o: &ProbeObserved) -> Vec<CheckResult> {
    p.checks
        .iter()
        .map(|c| {
            let reference = c.reference();
            match &c.check {
                ScenarioCheck::Healthy { is } => {
                    let healthy = o.status == Some(200);
                    let d =
                        format!("GET {}: {} (expected {})", o.path, o.answer(), if *is { "200" } else { "not 200" });
                    CheckResult::judged(&p.id, "healthy", healthy == *is, d, reference)
                }
                ScenarioCheck::WithinS { s } => {
                    let answered = o.status.is_some() && o.seconds <= *s;
                    let d = format!("GET {}: {} after {:.2}s, expected within {s}s", o.path, o.answer(), o.seconds);
                    CheckResult::judged(&p.id, "within_s", answered, d, reference)
                }
                other => CheckResult::judged(&p.id, other.name(), false, "not a probe check".into(), ""),
            }
        })
        .collect()
}

/// The checks of an action.
pub fn check_action(a: &GwAction, o: &ActionObserved) -> Vec<CheckResult> {
    a.checks
        .iter()
        .map(|c| {
            let reference = c.reference();
            match &c.check {
                ScenarioCheck::ExitsWithin { s } => {
                    let ok = o.ok && o.seconds <= *s;
                    let d = format!("{}, expected every process gone within {s}s", o.detail);
                    CheckResult::judged(&a.id, "exits_within", ok, d, reference)
                }
                ScenarioCheck::NoSocketFiles {} => {
                    let names: Vec<String> = o.socket_files.iter().map(|p| short_path(p, &o.searched)).collect();
                    let d = if names.is_empty() {
                        "no socket file left".to_string()
                    } else {
                        format!("{} socket file(s) left: {}", names.len(), names.join(", "))
                    };
                    CheckResult::judged(&a.id, "no_socket_files", names.is_empty(), d, reference)
                }
                ScenarioCheck::WithinS { s } => {
                    let ok = o.ok && o.seconds <= *s;
                    let d = format!("{}, expected within {s}s", o.detail);
                    CheckResult::judged(&a.id, "within_s", ok, d, reference)
                }
                other => CheckResult::judged(&a.id, other.name(), false, "not a check of this action".into(), ""),
            }
        })
        .collect()
}

/// `engine_finished` and `serves_or_exits` on a request.
pub fn check_lifecycle_request(check: &ScenarioCheck, obs: &Observed) -> (bool, String) {
    match check {
        ScenarioCheck::EngineFinished {} => {
            if obs.adds.is_empty() {
                return (false, "the gateway sent no ADD".into());
            }
            let mut bad = Vec::new();
            for (k, (id, _)) in obs.adds.iter().enumerate() {
                if obs.aborts.iter().any(|(a, _)| a == id) {
                    bad.push(format!("engine request {k} was ABORTed"));
                } else if !obs.engine_finished.iter().any(|(f, _)| f == id) {
                    bad.push(format!("engine request {k} did not finish"));
                }
            }
            let tokens: Vec<String> = obs.engine_finished.iter().map(|(_, n)| n.to_string()).collect();
            if bad.is_empty() {
                (true, format!("the engine finished every request itself ({} tokens), no ABORT", tokens.join(", ")))
            } else {
                (false, bad.join("; "))
            }
        }
        ScenarioCheck::ServesOrExits {} => {
            let served = obs.status.is_some_and(|s| (200..300).contains(&s))
                && obs.body.as_ref().is_none_or(|b| b.get("error").is_none_or(Json::is_null));
            let gone = obs.gateway_exited || obs.error.as_ref().is_some_and(NoResponse::refused);
            let what = match (obs.status, &obs.error) {
                (Some(s), _) => format!("HTTP {s} after {:.2}s", obs.seconds),
                (None, Some(e)) => format!("no response: {e}"),
                (None, None) => "nothing".into(),
            };
            match (served, gone) {
                (true, _) => (true, format!("served again: {what}")),
                (false, true) => (true, format!("the gateway is gone ({what}): a supervisor restarts it")),
                (false, false) => (false, format!("alive but not serving: {what}")),
            }
        }
        other => (false, format!("{} is not a lifecycle request check", other.name())),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::gateway::scenario::{ActionKind, ProbeRoute};
    use scenario_checks::check::CheckSpec;

    fn spec(v: Json) -> CheckSpec {
        CheckSpec::parse(scenario_checks::check::ScenarioKind::Gateway, &v).unwrap()
    }

    fn probe(check: Json) -> GwProbe {
        GwProbe {
            id: "p".into(),
            route: ProbeRoute::Ready,
            timeout: Duration::from_secs(1),
            until: None,
            wait: Duration::ZERO,
            checks: vec![spec(check)],
        }
    }

    fn stop(check: Json) -> GwAction {
        GwAction {
            id: "stop".into(),
            kind: ActionKind::StopGateway,
            timeout: Duration::from_secs(10),
            checks: vec![spec(check)],
        }
    }

    fn answered(status: Option<u16>, seconds: f64) -> ProbeObserved {
        ProbeObserved { path: "/readiness".into(), status, seconds, ..Default::default() }
    }

    fn refused() -> NoResponse {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        NoResponse::Http(crate::http::get(&addr, "/health", Duration::from_secs(1)).unwrap_err())
    }

    #[test]
    fn healthy_is_a_200_and_nothing_else() {
        let ready = probe(json!({"check": "healthy", "is": true}));
        assert!(check_probe(&ready, &answered(Some(200), 0.0))[0].ok);
        assert!(!check_probe(&ready, &answered(Some(503), 0.0))[0].ok);
        let not_ready = probe(json!({"check": "healthy", "is": false}));
        assert!(check_probe(&not_ready, &answered(Some(503), 0.0))[0].ok);
        let nothing_listening = ProbeObserved { error: Some(refused()), ..answered(None, 0.0) };
        let r = &check_probe(&not_ready, &nothing_listening)[0];
        assert!(r.ok && r.detail.contains("no answer: connect"), "{}", r.detail);
        assert!(!check_probe(&not_ready, &answered(Some(200), 0.0))[0].ok);
    }

    #[test]
    fn a_probe_within_s_needs_an_answer_in_time() {
        let p = probe(json!({"check": "within_s", "s": 1}));
        assert!(check_probe(&p, &answered(Some(503), 0.2))[0].ok);
        assert!(!check_probe(&p, &answered(Some(200), 1.5))[0].ok);
        assert!(!check_probe(&p, &ProbeObserved { error: Some(refused()), ..answered(None, 0.0) })[0].ok);
    }

    #[test]
    fn exits_within_fails_on_a_slow_or_a_killed_exit() {
        let a = stop(json!({"check": "exits_within", "s": 5}));
        let exited = |ok, seconds| ActionObserved { ok, seconds, detail: "SIGTERM".into(), ..Default::default() };
        assert!(check_action(&a, &exited(true, 1.2))[0].ok);
        assert!(!check_action(&a, &exited(true, 7.0))[0].ok);
        assert!(!check_action(&a, &exited(false, 10.0))[0].ok);
    }

    #[test]
    fn socket_files_left_behind_are_found_and_named_inside_the_gateway_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("t")).unwrap();
        std::fs::write(dir.path().join("gateway.log"), "a plain file is not a socket").unwrap();
        let a = stop(json!({"check": "no_socket_files"}));
        let searched = vec![dir.path().to_path_buf()];
        let none = ActionObserved {
            ok: true,
            socket_files: socket_files(&searched),
            searched: searched.clone(),
            ..Default::default()
        };
        assert!(check_action(&a, &none)[0].ok, "{:?}", none.socket_files);
        let _held = std::os::unix::net::UnixListener::bind(dir.path().join("t/engine-1-in.sock")).unwrap();
        let left = ActionObserved { ok: true, socket_files: socket_files(&searched), searched, ..Default::default() };
        let r = &check_action(&a, &left)[0];
        assert!(!r.ok);
        assert_eq!(r.detail, "1 socket file(s) left: <gateway dir>/t/engine-1-in.sock");
        assert_eq!(left.report("stop", "stop_gateway")["socket_files"], json!(["<gateway dir>/t/engine-1-in.sock"]));
    }

    #[test]
    fn serves_or_exits_passes_a_served_request_and_a_gone_gateway_only() {
        let check = ScenarioCheck::ServesOrExits {};
        let served = Observed { status: Some(200), body: Some(json!({"choices": []})), ..Default::default() };
        assert!(check_lifecycle_request(&check, &served).0);
        let exited = Observed { status: Some(500), gateway_exited: true, ..Default::default() };
        assert!(check_lifecycle_request(&check, &exited).0);
        let nothing_listening = Observed { error: Some(refused()), ..Default::default() };
        assert!(check_lifecycle_request(&check, &nothing_listening).0);
        let zombie =
            Observed { status: Some(500), body: Some(json!({"error": {"message": "x"}})), ..Default::default() };
        let (ok, d) = check_lifecycle_request(&check, &zombie);
        assert!(!ok && d.starts_with("alive but not serving"), "{d}");
        let error_in_a_200 =
            Observed { status: Some(200), body: Some(json!({"error": {"message": "x"}})), ..Default::default() };
        assert!(!check_lifecycle_request(&check, &error_in_a_200).0);
    }
}
