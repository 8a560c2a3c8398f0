//! `gpu-runner planted`: the planted-bug campaign (docs/planted-bugs.md).
//! Two copies of one of vLLM's frontends, each with the mock engine behind
//! it; the fault wire between the second and its engine plants one bug at
//! a time; the differential's probes tell whether it shows.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::differential::{named_target, parse_endpoints, parse_stream};
use super::{repo_path, CliError, WorkDir};
use gateway_scoring::fault::{FaultWire, Schedule};
use gateway_scoring::gateway::planted::{self, Explained, Outcome, Rig};
use gateway_scoring::gateway::request_space::RequestSpace;
use gateway_scoring::gateway::{self, differential, named, GatewayTarget, Session};

#[derive(clap::Args, Debug, Clone)]
pub struct PlantedArgs {
    /// The gateway both sides run: one of vLLM's frontends by name.
    #[arg(long, default_value = "vllm-0.32.0")]
    pub gateway: String,
    /// The request models whose probes are sent (default: the release's
    /// dump, `golden/generate/schema/openai-requests-vllm-<version>.json`).
    #[arg(long)]
    pub space: Option<PathBuf>,
    /// Model directory both sides load (default golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// `completions`, `chat` or `both`.
    #[arg(long, default_value = "both")]
    pub endpoints: String,
    /// `no`, `yes` or `both` (streamed probes).
    #[arg(long, default_value = "no")]
    pub stream: String,
    /// Every N-th probe of the sweep only (and every base probe): a fixed
    /// sample, for CI.
    #[arg(long, default_value_t = 1)]
    pub sample: usize,
    /// Only the bugs whose names contain one of these (repeatable).
    #[arg(long)]
    pub only: Vec<String>,
    /// Probes a bug is planted on, at most, until one differs (taken in
    /// turn from each endpoint: only a missed bug uses them all).
    #[arg(long, default_value_t = 8)]
    pub tries: usize,
    /// Seconds a request may take (a planted bug may leave the gateway
    /// waiting for an output that never comes).
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// The misses explained (`<bug> -- <why>` per line; default
    /// golden/gateway/planted-explained.txt).
    #[arg(long)]
    pub explained: Option<PathBuf>,
    #[arg(long)]
    pub report_json: Option<PathBuf>,
}

fn rig<'a>(
    reference: &'a Session,
    test: &'a Session,
    wire: &'a FaultWire,
    model: &'a str,
    timeout: Duration,
) -> Rig<'a> {
    Rig { reference, test, wire, model, grace: Duration::from_millis(100), timeout }
}

/// The test side: the gateway, the wire between it and its engine (no
/// fault armed), and the mock engine registered through the wire.
async fn test_side(target: &GatewayTarget, dir: &std::path::Path) -> Result<(Session, FaultWire), CliError> {
    super::faults::behind_wire(target, dir, Schedule::none()).await.map_err(CliError::Usage)
}

/// Returns 1 when a planted bug was missed without an explanation, or an
/// explanation is stale.
pub async fn planted(a: PlantedArgs) -> Result<i32, CliError> {
    let g = named::named(&a.gateway)
        .ok_or_else(|| CliError::Usage(format!("--gateway {}: expected one of vLLM's frontends", a.gateway)))?;
    let space_path = a
        .space
        .clone()
        .unwrap_or_else(|| repo_path(&format!("golden/generate/schema/openai-requests-vllm-{}.json", g.release)));
    let space = RequestSpace::load(&space_path).map_err(|e| CliError::Usage(e.to_string()))?;
    let (probes, _) = differential::sweep(&space, &parse_endpoints(&a.endpoints)?, &parse_stream(&a.stream)?);
    let mut probes = differential::sample(probes, a.sample, 0);
    let explained_path = a.explained.clone().unwrap_or_else(|| repo_path("golden/gateway/planted-explained.txt"));
    let text = std::fs::read_to_string(&explained_path).map_err(CliError::io(&explained_path))?;
    let explained =
        Explained::parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", explained_path.display())))?;
    let model = a.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    let target = named_target(&g.name, &model, &None, Duration::from_secs(180))?;
    let all = planted::bugs(target.release);
    let bugs: Vec<_> = all
        .iter()
        .filter(|b| a.only.is_empty() || a.only.iter().any(|o| b.name.contains(o.as_str())))
        .cloned()
        .collect();
    if bugs.is_empty() {
        return Err(CliError::Usage(format!("--only {:?}: no bug's name contains it", a.only)));
    }
    let work = WorkDir::new()?;
    let t0 = Instant::now();
    let reference = gateway::start(&target, &work.0.join("reference"), &[]).await?;
    let mut starts = 0;
    let (mut test, mut wire) = match test_side(&target, &work.0.join("test-0")).await {
        Ok(t) => t,
        Err(e) => {
            reference.stop().await;
            return Err(e);
        }
    };
    let timeout = Duration::from_secs_f64(a.timeout);
    let model = target.model_name.clone();
    let mut clean = rig(&reference, &test, &wire, &model, timeout).clean_pass(&probes).await;
    let more = planted::extra_probes(&probes, &clean);
    clean.extend(rig(&reference, &test, &wire, &model, timeout).clean_pass(&more).await);
    probes.extend(more);
    let noisy = clean.iter().filter(|c| c.noisy.is_some()).count();
    eprintln!(
        "{} probes sent clean in {:.0}s ({noisy} left out: both refuse them, or they differ already); {} bugs",
        probes.len(),
        t0.elapsed().as_secs_f64(),
        bugs.len()
    );
    // The health probe: the first base probe both sides served alike.
    let health = probes
        .iter()
        .zip(&clean)
        .find(|(p, c)| p.field.is_none() && c.noisy.is_none())
        .map(|(p, _)| p.clone())
        .ok_or_else(|| CliError::Usage("no base probe is served alike by both sides".into()))?;
    let mut results = Vec::new();
    let mut problems = Vec::new();
    for bug in &bugs {
        let o = rig(&reference, &test, &wire, &model, timeout).plant(bug, &probes, &clean, a.tries).await;
        let what = match &o {
            Outcome::Found { differences, .. } => differences.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            Outcome::Missed { probes: ps } => format!("planted on {} probe(s)", ps.len()),
            Outcome::NotPlanted(why) => why.clone(),
        };
        eprintln!("{:<12} {}: {what}", o.label().as_str(), bug.name);
        results.push((bug.clone(), o));
        // A bug may leave the frontend dead: the next starts on a fresh one.
        if !rig(&reference, &test, &wire, &model, timeout).healthy(&health).await {
            starts += 1;
            eprintln!("the test side no longer serves after {}: starting it again", bug.name);
            problems.extend(wire.stop().await.problems);
            test.stop().await;
            match test_side(&target, &work.0.join(format!("test-{starts}"))).await {
                Ok((t, w)) => (test, wire) = (t, w),
                Err(e) => {
                    reference.stop().await;
                    return Err(e);
                }
            }
        }
    }
    problems.extend(wire.stop().await.problems);
    reference.stop().await;
    test.stop().await;
    // Stale explanations of bugs not run are judged on a whole campaign only.
    let whole = a.only.is_empty() && a.sample <= 1;
    let judged = planted::judge(&results, &explained, whole);
    let report = planted::report(&g.name, &g.release, &probes, &clean, &results, &explained);
    let t = &report.totals;
    println!(
        "{} bugs: {} planted, {} found ({:.1} %), {} missed ({} of them explained), {} not planted; {:.0}s",
        t.bugs,
        t.planted,
        t.found,
        report.found_percent(),
        t.missed,
        t.missed_explained,
        t.not_planted,
        t0.elapsed().as_secs_f64()
    );
    for u in &judged.unexplained {
        println!("MISSED, not explained: {u}");
    }
    for s in &judged.stale {
        println!("STALE explanation {s}");
    }
    if starts > 0 {
        println!("the test side was started again {starts} time(s) after a bug left it not serving");
    }
    if !problems.is_empty() {
        println!("the wire's own problems: {}", problems.join("; "));
    }
    if let Some(p) = &a.report_json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| CliError::Usage(e.to_string()))? + "\n";
        std::fs::write(p, text).map_err(CliError::io(p))?;
    }
    Ok(if judged.unexplained.is_empty() && judged.stale.is_empty() { 0 } else { 1 })
}
