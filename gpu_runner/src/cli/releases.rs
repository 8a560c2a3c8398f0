//! `gpu-runner release-sweep`: which vLLM releases a gateway can talk to
//! (docs/runner/releases.md "Engine releases"). For each release the mock engine
//! plays it (`gpu-runner gateway --engine-release`) in front of a fresh
//! gateway, readiness and a fixed subset of `golden/gateway/` run
//! ([`SWEEP_SCENARIOS`]), and the results are judged against the
//! gateway's own release, run first ([`releases::summarize`]); the report
//! is `golden/gateway/reports/releases-<gateway>.json`, the scoreboard's
//! "Engine releases" section.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use super::score::{plan, Plan};
use super::{read_json, CliError, GatewayArgs, WorkDir};
use gateway_scoring::gateway::releases::{self, SWEEP_SCENARIOS};

#[derive(clap::Args, Debug, Clone)]
pub struct ReleaseSweepArgs {
    /// The gateway under test, as `gpu-runner gateway --gateway` takes it:
    /// `smg`, `vllm-rs-0.33.0`, ...
    #[arg(long, default_value = "smg")]
    pub gateway: String,
    /// The releases the engine plays (repeatable; default every table,
    /// 0.22.0 ... 0.33.0). The gateway's own release always runs, first:
    /// the others are judged against it.
    #[arg(long = "engine-release")]
    pub releases: Vec<String>,
    /// The scenarios besides readiness (default: length_finish,
    /// eos_finish, logprobs_top_k).
    #[arg(long)]
    pub only: Vec<String>,
    /// Model directory the gateway loads (default golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The SMG venv (with --gateway smg).
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// Seconds a gateway has to come up and say ready with the engine
    /// (vLLM's frontends get at least 180: they load the model config
    /// first). An engine it refuses costs this long unless it exits.
    #[arg(long, default_value_t = 20)]
    pub startup_timeout: u64,
    /// The sweep's report.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// A committed sweep report of the same gateway to bring up to date:
    /// the releases swept here replace their rows in it (a new release's
    /// row is added), its other rows are kept (`releases::merge_rows`).
    #[arg(long, conflicts_with = "report_json")]
    pub update: Option<PathBuf>,
    /// A committed sweep report: exit 1 when a release swept here has
    /// another outcome, count or reason than it says.
    #[arg(long)]
    pub expect: Option<PathBuf>,
}

/// `gateway`'s arguments for one release, read as its command line is.
#[derive(Parser)]
struct One {
    #[command(flatten)]
    args: GatewayArgs,
}

fn gateway_args(a: &ReleaseSweepArgs) -> Result<GatewayArgs, CliError> {
    let mut argv: Vec<String> = vec!["gateway".into(), "--gateway".into(), a.gateway.clone()];
    argv.extend(["--startup-timeout".into(), a.startup_timeout.to_string()]);
    if let Some(m) = &a.model {
        argv.extend(["--model".into(), m.display().to_string()]);
    }
    if let Some(v) = &a.venv {
        argv.extend(["--venv".into(), v.display().to_string()]);
    }
    let only: Vec<String> =
        if a.only.is_empty() { SWEEP_SCENARIOS.iter().map(|s| s.to_string()).collect() } else { a.only.clone() };
    for s in &only {
        argv.extend(["--only".into(), s.clone()]);
    }
    One::try_parse_from(argv).map(|o| o.args).map_err(|e| CliError::Usage(e.to_string()))
}

/// `gpu-runner release-sweep`: 0, or 1 when `--expect` finds a changed row.
pub async fn release_sweep(a: ReleaseSweepArgs) -> Result<i32, CliError> {
    let t0 = Instant::now();
    let base = gateway_args(&a)?;
    let versions: Vec<String> = if a.releases.is_empty() {
        engine_protocol::Dialect::Vllm.releases().iter().map(|r| r.version.to_string()).collect()
    } else {
        a.releases.clone()
    };
    for v in &versions {
        engine_protocol::release(engine_protocol::Dialect::Vllm, v)?;
    }
    let work = WorkDir::new()?;
    let mut name = a.gateway.clone();
    let mut own = String::new();
    let mut baseline = Vec::new();
    let mut rows = Vec::new();
    // The gateway's own release first (the baseline), then the others.
    let mut order: Vec<Option<String>> = vec![None];
    order.extend(versions.iter().cloned().map(Some));
    for which in order {
        let mut args = base.clone();
        args.engine_release = which.clone();
        let Plan::Mock(p) = plan(&args)? else {
            return Err(CliError::Usage("release-sweep plays the engine: the gateway must take the mock".into()));
        };
        let version = p.target.release.version.to_string();
        if which.is_none() {
            own = p.own.version.to_string();
            name = p.name.clone();
        } else if version == own {
            // The baseline was this release.
            continue;
        }
        eprintln!("== {name}: the engine plays vLLM {version}");
        let dir = work.0.join(&version);
        let started = Instant::now();
        let results = gateway_scoring::gateway::run_all(&p.target, &p.scenarios, &p.tok, &p.expectations, &dir).await?;
        let log = std::fs::read_to_string(dir.join("gw/gateway.log")).unwrap_or_default();
        if which.is_none() {
            baseline = results.clone();
        }
        let mut row = releases::summarize(&version, &own, &results, &baseline, &log);
        row.engine_side = p.engine_side.clone();
        row.seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "vLLM {version}: {} {}/{}{} ({:.1}s)",
            row.outcome(),
            row.passed,
            row.total,
            row.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default(),
            row.seconds
        );
        rows.push(row);
    }
    // One row per release, in the order asked for (the gateway's own
    // release last when it was not asked for).
    let mut ordered: Vec<releases::ReleaseOutcome> = Vec::new();
    for v in versions.iter().chain(std::iter::once(&own)) {
        if let (false, Some(r)) = (ordered.iter().any(|r| &r.release == v), rows.iter().find(|r| &r.release == v)) {
            ordered.push(r.clone());
        }
    }
    let scenarios: Vec<String> =
        if a.only.is_empty() { SWEEP_SCENARIOS.iter().map(|s| s.to_string()).collect() } else { a.only.clone() };
    let seconds = t0.elapsed().as_secs_f64();
    let swept = releases::sweep_report(&name, &own, &scenarios, seconds, &ordered);
    println!("{name}: {} releases in {seconds:.0}s", ordered.len());
    for r in &ordered {
        println!(
            "  vLLM {:<7} {} {}/{}{}",
            r.release,
            r.outcome(),
            r.passed,
            r.total,
            r.reason.as_deref().map(|x| format!(": {x}")).unwrap_or_default()
        );
    }
    if let Some(p) = &a.report_json {
        std::fs::write(p, releases::report_text(&swept)).map_err(CliError::io(p))?;
    }
    if let Some(p) = &a.update {
        let committed = read_json(p)?;
        let merged = releases::merge_rows(&committed, &swept).ok_or_else(|| {
            CliError::Usage(format!(
                "--update {}: a sweep of another gateway, own release or items than this one ({name}, {own})",
                p.display()
            ))
        })?;
        std::fs::write(p, releases::report_text(&merged)).map_err(CliError::io(p))?;
    }
    if let Some(p) = &a.expect {
        let changed = releases::changed_rows(&swept, &read_json(p)?);
        for c in &changed {
            eprintln!("changed: {c}");
        }
        if !changed.is_empty() {
            return Ok(1);
        }
    }
    Ok(0)
}
