//! `gpu-runner gateway-bench`: the gateway overhead benchmark
//! (docs/gateway-bench.md). Each gateway starts once with an instant mock
//! engine behind it (no step delay); then, round after round, every
//! gateway is driven at every load point in turn (A at each point, then B,
//! then C), so drift of the shared machine falls on all alike; tokens/s
//! ratios against the reference gateway are taken per round.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::differential::named_target;
use super::{repo_path, CliError, WorkDir};
use gateway_scoring::gateway::bench::{self, Latencies, LoadPoint, PointSummary, ProcUse, RoundResult};
use gateway_scoring::gateway::loadgen::{self, LoadRequest, Outcomes, Spacing};
use gateway_scoring::gateway::{self, GatewayLaunch, GatewayTarget, Session};
use process_sandbox::launcher::EngineProcess;

#[derive(clap::Args, Debug, Clone)]
pub struct GatewayBenchArgs {
    /// Gateways, comma-separated: `smg` and vLLM's frontends by name; the
    /// first is the reference of the ratios.
    #[arg(long, default_value = "smg,vllm-rs-0.33.0,vllm-0.33.0")]
    pub gateways: String,
    /// Closed-loop concurrencies, comma-separated (empty: none).
    #[arg(long, default_value = "1,4,16,64")]
    pub clients: String,
    /// Open-loop rates in requests/s, comma-separated (empty: none).
    #[arg(long, default_value = "")]
    pub rates: String,
    /// Open-loop spacing: `poisson` or `fixed`.
    #[arg(long, default_value = "poisson")]
    pub spacing: String,
    /// Open loop: arrivals beyond this many requests under way are shed.
    #[arg(long, default_value_t = 256)]
    pub max_in_flight: usize,
    /// Seconds per load point per gateway per round.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Tokens per request (`max_tokens`, with `ignore_eos`).
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,
    #[arg(long, default_value = "The quick brown fox jumps over the lazy dog.")]
    pub prompt: String,
    /// The mock engine's time between output steps, ms (0: instant).
    #[arg(long, default_value_t = 0)]
    pub step_delay_ms: u64,
    /// Another engine in the suite's mock's place: a shell command with
    /// the placeholder `{handshake}` (the gateway's handshake address),
    /// e.g. vLLM's own Rust mock engine (`vllm-mock-engine
    /// --handshake-address {handshake}`). Its outputs are not counted.
    #[arg(long)]
    pub engine_command: Option<String>,
    /// Model directory the gateways load (default golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The SMG venv (default ~/.cache/engine-conformance/venvs/smg-1.13.0).
    #[arg(long)]
    pub smg_venv: Option<PathBuf>,
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// A Markdown file whose generated section (between
    /// `<!-- gateway-bench:begin -->` and `<!-- gateway-bench:end -->`) is
    /// replaced with the results (appended when the markers are absent).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// The markers' name in the Markdown file (`<!-- NAME:begin -->`).
    #[arg(long, default_value = "gateway-bench")]
    pub section: String,
}

fn list<T: std::str::FromStr>(flag: &str, s: &str) -> Result<Vec<T>, CliError> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().map_err(|_| CliError::Usage(format!("--{flag}: {x:?} is not a number"))))
        .collect()
}

/// A gateway under load and the external engine behind it, if any.
struct Started {
    session: Session,
    engine: Option<EngineProcess>,
}

impl Started {
    async fn stop(mut self) {
        if let Some(e) = self.engine.as_mut() {
            e.stop();
        }
        self.session.stop().await;
    }
}

/// Starts the gateway and `engine_command`'s engine behind it, waits for ready.
async fn start_external(target: &GatewayTarget, dir: &Path, engine_command: &str) -> Result<Started, CliError> {
    let s = gateway::start_with(target, dir, &[], false).await?;
    let cmd = engine_command.replace("{handshake}", &s.handshake);
    let log = dir.join("engine.log");
    let out = std::fs::File::create(&log).map_err(CliError::io(&log))?;
    let err = out.try_clone().map_err(CliError::io(&log))?;
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(&cmd).stdout(out).stderr(err);
    let engine = match EngineProcess::spawn(c, Duration::from_secs(2)) {
        Ok(e) => e,
        Err(e) => {
            s.stop().await;
            return Err(e.into());
        }
    };
    eprintln!("engine pid {} ({cmd}, log {})", engine.pid(), log.display());
    let st = Started { session: s, engine: Some(engine) };
    if let Err(e) = st.session.wait_ready(target.startup_timeout).await {
        st.stop().await;
        return Err(CliError::Usage(format!("{}: {e}", s_name(target))));
    }
    Ok(st)
}

/// Starts the gateway, registers an instant mock engine, waits for ready.
async fn start(target: &GatewayTarget, dir: &Path, step_delay: Duration) -> Result<Session, CliError> {
    let mut s = gateway::start_with(target, dir, &[], false).await?;
    let limit = target.startup_timeout;
    let tune = |script: &mut mock_engine::vllm_script::Script| {
        script.step_delay = step_delay;
        // Counters only: no per-message records, so the engine stays fast
        // and its memory flat over a long run.
        script.lean = true;
    };
    if let Err(e) = s.register_tuned(tune, limit).await {
        s.stop().await;
        return Err(CliError::Usage(format!("{}: the mock engine did not register: {e}", s_name(target))));
    }
    match s.wait_ready(limit).await {
        Ok(()) => Ok(s),
        Err(e) => {
            s.stop().await;
            Err(CliError::Usage(format!("{}: {e}", s_name(target))))
        }
    }
}

fn s_name(t: &GatewayTarget) -> String {
    match &t.launch {
        GatewayLaunch::Smg { .. } => "smg".into(),
        GatewayLaunch::Command(c) => {
            c.split_whitespace().find(|w| w.ends_with("/vllm")).unwrap_or("command").to_string()
        }
        GatewayLaunch::Attach => "attached".into(),
    }
}

/// Outputs (one per request per step) the mock engine sent so far.
fn mock_outputs(s: &Session) -> Option<u64> {
    s.mock.as_ref().map(|m| m.log().counts.outputs)
}

/// Runs one load point on its own thread and runtime (the mock engines
/// keep this one), sampling the gateway's process tree meanwhile.
async fn drive(spec: Arc<LoadRequest>, load: LoadPoint, a: &GatewayBenchArgs, pid: Option<u32>) -> (Outcomes, ProcUse) {
    let secs = Duration::from_secs_f64(a.seconds);
    let spacing = if a.spacing == "fixed" { Spacing::Fixed } else { Spacing::Poisson };
    let max_in_flight = a.max_in_flight;
    let before = pid.map(bench::tree_sample);
    let job = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        Some(rt.block_on(async move {
            match load {
                LoadPoint::Closed { clients } => loadgen::closed_loop(spec, clients, secs).await,
                LoadPoint::Open { rate } => {
                    let at = loadgen::arrivals(rate, secs, spacing, 7);
                    loadgen::open_loop(spec, &at, max_in_flight).await
                }
            }
        }))
    });
    let mut peak = before.as_ref().map_or(0.0, |b| b.1);
    while !job.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(p) = pid {
            peak = f64::max(peak, bench::tree_sample(p).1);
        }
    }
    let after = pid.map(bench::tree_sample);
    let cpu = match (&before, &after) {
        (Some(b), Some(a)) => bench::cpu_between(&b.0, &a.0),
        _ => 0.0,
    };
    let out = job.join().ok().flatten().unwrap_or_default();
    (out, ProcUse { cpu_s: cpu, peak_rss_mib: peak })
}

/// `w` as a POSIX shell reads it back: bare when plain, else single-quoted.
fn shell_word(w: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./,:=@%+".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn replace_section(doc: &str, name: &str, section: &str) -> String {
    let (begin, end) = (format!("<!-- {name}:begin -->"), format!("<!-- {name}:end -->"));
    match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if b < e => format!("{}{begin}\n{section}{}", &doc[..b], &doc[e..]),
        _ => format!("{doc}\n{begin}\n{section}{end}\n"),
    }
}

pub async fn gateway_bench(a: GatewayBenchArgs) -> Result<i32, CliError> {
    let t_run = Instant::now();
    let names: Vec<String> = a.gateways.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let mut loads: Vec<LoadPoint> =
        list::<usize>("clients", &a.clients)?.into_iter().map(|clients| LoadPoint::Closed { clients }).collect();
    loads.extend(list::<f64>("rates", &a.rates)?.into_iter().map(|rate| LoadPoint::Open { rate }));
    if names.is_empty() || loads.is_empty() || a.rounds == 0 {
        return Err(CliError::Usage("no gateway, no load point or no round".into()));
    }
    if !matches!(a.spacing.as_str(), "poisson" | "fixed") {
        return Err(CliError::Usage(format!("--spacing {}: expected poisson or fixed", a.spacing)));
    }
    let model = a.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    let work = WorkDir::new()?;
    let step_delay = Duration::from_millis(a.step_delay_ms);
    let mut sessions: Vec<Started> = Vec::new();
    for n in &names {
        let started = async {
            let t = named_target(n, &model, &a.smg_venv, Duration::from_secs(180))?;
            match &a.engine_command {
                Some(c) => start_external(&t, &work.0.join(n), c).await,
                None => Ok(Started { session: start(&t, &work.0.join(n), step_delay).await?, engine: None }),
            }
        };
        match started.await {
            Ok(s) => sessions.push(s),
            Err(e) => {
                for s in sessions {
                    s.stop().await;
                }
                return Err(e);
            }
        }
    }
    let timeout = Duration::from_secs_f64(a.seconds + 60.0);
    let specs: Vec<Arc<LoadRequest>> = sessions
        .iter()
        .map(|Started { session: s, .. }| {
            Arc::new(LoadRequest::completion(&s.http, &model.display().to_string(), &a.prompt, a.max_tokens, timeout))
        })
        .collect();
    // Warm-up: connections, tokenizer caches, lazy paths.
    for (Started { session: s, .. }, spec) in sessions.iter().zip(&specs) {
        let o = loadgen::closed_loop(spec.clone(), 4, Duration::from_secs(2)).await;
        eprintln!("warm-up {}: {} ok, {} errors {:?}", s.http, o.ok.len(), o.errors.len(), o.errors.first());
    }
    let mut rounds: Vec<Vec<Vec<RoundResult>>> = vec![vec![Vec::new(); loads.len()]; names.len()];
    let mut lats: Vec<Vec<Latencies>> = vec![vec![Latencies::default(); loads.len()]; names.len()];
    for round in 0..a.rounds {
        for (g, Started { session: s, .. }) in sessions.iter().enumerate() {
            for (l, load) in loads.iter().enumerate() {
                let m0 = mock_outputs(s);
                let (o, use_) = drive(specs[g].clone(), *load, &a, s.pid()).await;
                let mock = m0.zip(mock_outputs(s)).map(|(b, e)| e.saturating_sub(b));
                let (r, lat) = RoundResult::new(round, &o, use_, mock);
                eprintln!(
                    "round {round} {} {}: {} ok, {} errors, {:.0} tok/s, ITL p50 {:?} ms, gateway CPU {:.2}s",
                    names[g],
                    load.label(),
                    r.ok,
                    r.errors,
                    r.tokens_per_s,
                    r.itl_p50_ms,
                    r.gateway.cpu_s
                );
                lats[g][l].merge(&lat);
                rounds[g][l].push(r);
            }
        }
    }
    for s in sessions {
        s.stop().await;
    }
    let mut points: Vec<PointSummary> = Vec::new();
    for (l, load) in loads.iter().enumerate() {
        for (g, n) in names.iter().enumerate() {
            points.push(PointSummary::new(n, *load, std::mem::take(&mut rounds[g][l]), &lats[g][l]));
        }
        let start = points.len() - names.len();
        let reference = points[start].clone();
        for p in &mut points[start..] {
            p.set_ratios(&reference);
        }
    }
    let total = t_run.elapsed().as_secs_f64();
    let machine = bench::machine();
    // The command as a reader types it (the binary by name, not its path).
    let command: Vec<String> =
        std::iter::once("gpu-runner".to_string()).chain(std::env::args().skip(1).map(|a| shell_word(&a))).collect();
    let report = serde_json::json!({
        "machine": machine,
        "command": command.join(" "),
        "total_seconds": total,
        "reference": names[0],
        "settings": {
            "seconds_per_point": a.seconds, "rounds": a.rounds, "max_tokens": a.max_tokens,
            "prompt": a.prompt, "step_delay_ms": a.step_delay_ms, "spacing": a.spacing,
            "engine": a.engine_command.clone().unwrap_or_else(|| "the suite's mock engine (lean)".into()),
        },
        "points": points,
    });
    let table = bench::markdown_table(&points, &names[0]);
    println!("{table}");
    if let Some(p) = &a.report_json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        std::fs::write(p, text + "\n").map_err(CliError::io(p))?;
    }
    if let Some(p) = &a.markdown {
        let doc = std::fs::read_to_string(p).unwrap_or_default();
        let section = format!(
            "Machine: {machine}. Engine: {}. {} rounds × {} s per load point per gateway, {} tokens per \
             request, mock step delay {} ms; the whole run took {:.0} s.\n\nCommand: `{}`\n\n{table}",
            a.engine_command.as_deref().unwrap_or("the suite's mock engine (lean)"),
            a.rounds,
            a.seconds,
            a.max_tokens,
            a.step_delay_ms,
            total,
            command.join(" ")
        );
        std::fs::write(p, replace_section(&doc, &a.section, &section)).map_err(CliError::io(p))?;
    }
    let errors: u64 = points.iter().map(|p| p.errors).sum();
    Ok(if errors > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_section_replaces_only_what_is_between_the_markers() {
        let doc = "intro\n<!-- gateway-bench:begin -->\nold\n<!-- gateway-bench:end -->\nafter\n";
        assert_eq!(
            replace_section(doc, "gateway-bench", "new\n"),
            "intro\n<!-- gateway-bench:begin -->\nnew\n<!-- gateway-bench:end -->\nafter\n"
        );
        assert!(replace_section("x\n", "gateway-bench", "t\n")
            .ends_with("<!-- gateway-bench:begin -->\nt\n<!-- gateway-bench:end -->\n"));
    }

    #[test]
    fn a_command_word_with_spaces_or_quotes_is_quoted_for_the_shell() {
        assert_eq!(shell_word("--clients"), "--clients");
        assert_eq!(shell_word("a {h} b"), "'a {h} b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn a_list_that_is_not_numbers_is_refused_naming_the_flag() {
        assert_eq!(list::<usize>("clients", "1, 4,").unwrap(), vec![1, 4]);
        let e = list::<usize>("clients", "1,x").unwrap_err().to_string();
        assert!(e.contains("--clients") && e.contains("\"x\""), "{e}");
    }
}
