//! `gpu-runner soak`: the runner's transport against the lean mock engine
//! in a child process, at full speed, with every request accounted for and
//! both processes' memory and file descriptors watched (docs/soak.md).
//! Exit 0: passed; 1: a finding (lost or duplicated request, growth past a
//! limit); 2: it could not run.

use std::path::PathBuf;
use std::time::Duration;

use super::CliError;
use gateway_scoring::soak::{self, GrowthLimits, SoakOptions};

#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// Seconds to run.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Requests kept in flight (closed loop).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Tokens per request (`max_tokens`, with `ignore_eos`).
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// The share of the duration after which memory and descriptors are
    /// the baseline of the growth checks.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// Seconds between resource samples.
    #[arg(long, default_value_t = 10.0)]
    pub sample_every: f64,
    /// Resident memory each process may gain after the warm-up, KiB.
    #[arg(long, default_value_t = GrowthLimits::default().rss_kib)]
    pub max_rss_growth_kib: u64,
    /// File descriptors each process may gain after the warm-up.
    #[arg(long, default_value_t = GrowthLimits::default().fds)]
    pub max_fd_growth: u64,
    /// A request silent this long is lost (seconds).
    #[arg(long, default_value_t = 10.0)]
    pub silence: f64,
    /// Where to write the JSON report.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// A line per sample on stderr.
    #[arg(long)]
    pub progress: bool,
}

/// `gpu-runner soak`.
pub async fn soak(a: SoakArgs) -> Result<i32, CliError> {
    let secs = |x: f64, what: &str| {
        Duration::try_from_secs_f64(x).map_err(|_| CliError::Usage(format!("--{what} must be a number of seconds")))
    };
    if a.concurrency == 0 || a.max_tokens == 0 {
        return Err(CliError::Usage("--concurrency and --max-tokens must be at least 1".into()));
    }
    let exe = std::env::current_exe().map_err(CliError::io(std::path::Path::new("/proc/self/exe")))?;
    let mut o = SoakOptions::new(exe, secs(a.duration, "duration")?);
    o.concurrency = a.concurrency;
    o.max_tokens = a.max_tokens;
    o.warmup = a.warmup;
    o.sample_every = secs(a.sample_every, "sample-every")?;
    o.silence = secs(a.silence, "silence")?;
    o.limits = GrowthLimits { rss_kib: a.max_rss_growth_kib, fds: a.max_fd_growth };
    o.progress = a.progress;
    let report = match soak::run(&o).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpu-runner: {e}");
            return Ok(2);
        }
    };
    if let Some(p) = &a.report {
        soak::write_report(p, &report).map_err(CliError::io(p))?;
    }
    print!("{}", soak::summary(&report));
    Ok(if report.passed { 0 } else { 1 })
}
