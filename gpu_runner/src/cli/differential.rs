//! `gpu-runner differential`: the request-space sweep sent to a reference
//! gateway (one of vLLM's frontends) and to the gateway under test, each
//! with the mock engine behind it (docs/runner/differential.md "The differential").

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{repo_path, repo_root, CliError, WorkDir};
use gateway_scoring::gateway::diff_expectations::DiffExpectations;
use gateway_scoring::gateway::differential::{self, DiffProbe, ProbeVerdict};
use gateway_scoring::gateway::request_space::RequestSpace;
use gateway_scoring::gateway::{self, combinations, named, Endpoint, GatewayLaunch, GatewayTarget};

#[derive(clap::Args, Debug, Clone)]
pub struct DifferentialArgs {
    /// The reference: one of vLLM's frontends by name (`vllm-0.33.0`,
    /// `vllm-0.32.0`).
    #[arg(long, default_value = "vllm-0.33.0")]
    pub reference: String,
    /// The gateway under test: `smg` or a vLLM frontend by name.
    #[arg(long, default_value = "smg")]
    pub gateway: String,
    /// The request models to sweep (default: the reference release's dump,
    /// `golden/generate/schema/openai-requests-vllm-<version>.json`).
    #[arg(long)]
    pub space: Option<PathBuf>,
    /// Model directory both gateways load (default golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// `completions`, `chat` or `both`.
    #[arg(long, default_value = "both")]
    pub endpoints: String,
    /// `no`, `yes` or `both` (streamed probes).
    #[arg(long, default_value = "both")]
    pub stream: String,
    /// Only these fields (repeatable; default every field).
    #[arg(long = "field")]
    pub fields: Vec<String>,
    /// After the sweep, this many random combinations of fields (each
    /// differing one shrunk to a minimal differing request).
    #[arg(long, default_value_t = 0)]
    pub combinations: usize,
    /// Fields per combination, at most.
    #[arg(long, default_value_t = 4)]
    pub max_fields: usize,
    /// The combinations' seed (the same seed draws the same requests).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every N-th probe only (with --offset): a fixed sample.
    #[arg(long, default_value_t = 1)]
    pub sample: usize,
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// The findings, the parameter matrix's counts and what was left out, as JSON.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// The parameter matrix as a markdown table.
    #[arg(long)]
    pub matrix_md: Option<PathBuf>,
    /// Known findings (`<field> <endpoint> <reason>` per line,
    /// `gateway::diff_expectations`): listed differences do not fail the
    /// run; a listed field that was probed and agreed does.
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    /// The SMG venv (with --gateway smg).
    #[arg(long)]
    pub venv: Option<PathBuf>,
}

/// How a named gateway is started for the mock to play its engine: SMG
/// (from its venv, `/readiness`) or a named vLLM frontend (`/health`), with
/// the registration and release the mock answers it with. Shared by the
/// differential, the fault cases and the overhead benchmark.
pub(crate) fn named_target(
    name: &str,
    model: &Path,
    smg_venv: &Option<PathBuf>,
    startup_timeout: Duration,
) -> Result<GatewayTarget, CliError> {
    // The mock decodes what each side sends with that side's release.
    let version = named::named(name).map_or("0.32.0", |g| g.release.as_str());
    let release = engine_protocol::release(engine_protocol::Dialect::Vllm, version)?;
    let (launch, ready, reg) = if name == "smg" {
        let venv = smg_venv.clone().unwrap_or_else(gateway::smg::default_venv);
        gateway::smg::check_venv(&venv)?;
        (GatewayLaunch::Smg { venv }, "/readiness", gateway::READY_RESPONSE_CASE.to_string())
    } else {
        let g = named::named(name).ok_or_else(|| {
            let known: Vec<&str> = named::all().iter().map(|g| g.name.as_str()).collect();
            CliError::Usage(format!("unknown gateway {name:?}: expected smg or one of {}", known.join(", ")))
        })?;
        (g.launch(None).map_err(|e| CliError::Usage(e.to_string()))?, "/health", g.registration_case(&repo_root()))
    };
    Ok(GatewayTarget {
        launch,
        http: None,
        handshake: None,
        model_name: model.display().to_string(),
        model: model.to_path_buf(),
        ready_path: ready.into(),
        startup_timeout,
        registration: gateway::registration_from_case(&repo_path(&reg))?,
        release,
    })
}

/// `--endpoints`: `completions`, `chat` or `both` (the differential's and
/// the planted-bug campaign's).
pub(crate) fn parse_endpoints(s: &str) -> Result<Vec<Endpoint>, CliError> {
    Ok(match s {
        "completions" => vec![Endpoint::Completions],
        "chat" => vec![Endpoint::Chat],
        "both" => vec![Endpoint::Completions, Endpoint::Chat],
        o => return Err(CliError::Usage(format!("--endpoints {o}: expected completions, chat or both"))),
    })
}

/// `--stream`: `no`, `yes` or `both`.
pub(crate) fn parse_stream(s: &str) -> Result<Vec<bool>, CliError> {
    Ok(match s {
        "no" => vec![false],
        "yes" => vec![true],
        "both" => vec![false, true],
        o => return Err(CliError::Usage(format!("--stream {o}: expected no, yes or both"))),
    })
}

/// `gpu-runner differential`: returns 1 when a probe differs unexpectedly
/// or a known finding is stale.
pub async fn differential(args: DifferentialArgs) -> Result<i32, CliError> {
    let reference = named::named(&args.reference)
        .ok_or_else(|| CliError::Usage(format!("--reference {}: expected one of vLLM's frontends", args.reference)))?;
    let space_path = args.space.clone().unwrap_or_else(|| {
        repo_path(&format!("golden/generate/schema/openai-requests-vllm-{}.json", reference.release))
    });
    let space = RequestSpace::load(&space_path).map_err(|e| CliError::Usage(e.to_string()))?;
    let (endpoints, streams) = (parse_endpoints(&args.endpoints)?, parse_stream(&args.stream)?);
    let (mut probes, left_out) = differential::sweep(&space, &endpoints, &streams);
    let combos =
        combinations::draw(&space, &endpoints, &streams, &args.fields, args.combinations, args.max_fields, args.seed);
    if combos.len() < args.combinations {
        return Err(CliError::Usage(format!(
            "--combinations {}: only {} can be drawn (a combination needs two swept fields of one endpoint)",
            args.combinations,
            combos.len()
        )));
    }
    if !args.fields.is_empty() {
        for f in &args.fields {
            if !probes.iter().any(|p| p.field.as_deref() == Some(f.as_str())) {
                return Err(CliError::Usage(format!("--field {f}: no probe sets it (not a swept field)")));
            }
        }
        probes.retain(|p: &DiffProbe| p.field.as_ref().is_none_or(|f| args.fields.contains(f)));
    }
    let probes = differential::sample(probes, args.sample, args.offset);
    let known = match &args.expectations {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(CliError::io(p))?;
            DiffExpectations::parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", p.display())))?
        }
        None => DiffExpectations::default(),
    };
    let model = args.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    let ref_target = named_target(&reference.name, &model, &None, Duration::from_secs(180))?;
    let test_target = named_target(&args.gateway, &model, &args.venv, Duration::from_secs(180))?;
    let work = WorkDir::new()?;
    eprintln!("{} probes; {} fields left out", probes.len(), left_out.len());
    let a = gateway::start(&ref_target, &work.0.join("reference"), &[]).await?;
    let b = match gateway::start(&test_target, &work.0.join("test"), &[]).await {
        Ok(b) => b,
        Err(e) => {
            a.stop().await;
            return Err(e.into());
        }
    };
    let grace = Duration::from_millis(100);
    let results = differential::run(&a, &b, &probes, &ref_target.model_name, grace).await;
    let base = differential::base_differences(&results);
    let combined = combinations::run(&a, &b, &combos, &base, &ref_target.model_name, grace).await;
    a.stop().await;
    b.stop().await;
    // Stale lines are judged on a whole sweep only (no --sample, no --field).
    let judged = known.judge(&results, args.sample <= 1 && args.fields.is_empty());
    for (label, list) in [("expected", &judged.expected), ("DIFFERS", &judged.unexpected)] {
        for r in list.iter() {
            let what = match &r.verdict {
                ProbeVerdict::Refused(s) => format!("refused ({s})"),
                ProbeVerdict::Differs(d) => {
                    d.iter().map(|x| format!("{} {} vs {}", x.path, x.reference, x.test)).collect::<Vec<_>>().join("; ")
                }
                _ => String::new(),
            };
            println!(
                "{label} {} {}{} {}={}: {what}",
                args.gateway,
                r.probe.endpoint.path(),
                if r.probe.stream { " (stream)" } else { "" },
                r.probe.field.as_deref().unwrap_or("base"),
                r.probe.value
            );
        }
    }
    for k in &judged.stale {
        println!("STALE line {}: {} agrees with {} now: {}", k.line, k.field, reference.name, k.reason);
    }
    println!(
        "{} probes: {} differ from {} as known, {} unexpectedly; {} stale expectations",
        results.len(),
        judged.expected.len(),
        reference.name,
        judged.unexpected.len(),
        judged.stale.len()
    );
    // A combination is explained when its minimal differing request is one
    // field the expectations list; an interaction of several is new.
    let mut new_interactions = 0;
    for c in combined.iter().filter(|c| c.minimal.is_some()) {
        let Some((min, diffs)) = &c.minimal else { continue };
        let known = min.set.len() == 1 && known.lists(&min.set[0].0, min.endpoint);
        if !known {
            new_interactions += 1;
        }
        let what =
            diffs.iter().map(|x| format!("{} {} vs {}", x.path, x.reference, x.test)).collect::<Vec<_>>().join("; ");
        println!(
            "{} combination {}{} {} -> minimal {}: {what}",
            if known { "expected" } else { "DIFFERS" },
            min.endpoint.path(),
            if min.stream { " (stream)" } else { "" },
            c.combination.describe(),
            min.describe()
        );
    }
    if !combined.is_empty() {
        println!(
            "{} combinations (--seed {}): {} differ, {} not explained by a known single field",
            combined.len(),
            args.seed,
            combined.iter().filter(|c| c.minimal.is_some()).count(),
            new_interactions
        );
    }
    let failed = !judged.unexpected.is_empty() || !judged.stale.is_empty() || new_interactions > 0;
    if let Some(p) = &args.report_json {
        let mut j = differential::report_json(&reference.name, &args.gateway, &results, &left_out);
        j["combinations"] = serde_json::json!(combined
            .iter()
            .filter_map(|c| {
                let (min, d) = c.minimal.as_ref()?;
                Some(serde_json::json!({
                    "endpoint": c.combination.endpoint.path(),
                    "stream": c.combination.stream,
                    "request": c.combination.body(),
                    "minimal_request": min.body(),
                    "minimal_fields": min.set.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
                    "differences": d.iter().map(|x| serde_json::json!({"path": x.path, "reference": x.reference, "test": x.test})).collect::<Vec<_>>(),
                }))
            })
            .collect::<Vec<_>>());
        j["combinations_sent"] = serde_json::json!(combined.len());
        j["combinations_seed"] = serde_json::json!(args.seed);
        let text = serde_json::to_string_pretty(&j).unwrap_or_default().replace(&model.display().to_string(), "MODEL");
        std::fs::write(p, text + "\n").map_err(CliError::io(p))?;
    }
    if let Some(p) = &args.matrix_md {
        std::fs::write(p, differential::matrix_markdown(&args.gateway, &results)).map_err(CliError::io(p))?;
    }
    Ok(if failed { 1 } else { 0 })
}
