//! `gpu-runner report --html DIR`: the committed reports as a static site
//! (docs/report-site.md), built by the `report-site` crate.

use std::path::PathBuf;
use std::time::Instant;

use super::{repo_root, CliError};

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Write the site into this directory (created if missing).
    #[arg(long)]
    pub html: PathBuf,
    /// The gateway, differential, release and fault reports (default: the
    /// checkout's `golden/gateway/reports`).
    #[arg(long)]
    pub reports_dir: Option<PathBuf>,
    /// The scenario files the findings' requests come from (default: the
    /// checkout's `golden/gateway`).
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
}

/// Builds the site; prints where and what.
pub fn report(args: ReportArgs) -> Result<i32, CliError> {
    let started = Instant::now();
    let mut paths = report_site::Paths::checkout(&repo_root());
    if let Some(d) = args.reports_dir {
        paths.reports = d;
    }
    if let Some(d) = args.scenarios {
        paths.scenarios = d;
    }
    let inputs = report_site::Inputs::read(&paths)?;
    let s = report_site::build(&inputs, &args.html)?;
    println!(
        "site: {} ({} pages, {} Markdown bug reports, {} gateway findings) in {:.1} s; open {}",
        args.html.display(),
        s.pages,
        s.markdown,
        s.findings,
        started.elapsed().as_secs_f64(),
        args.html.join("index.html").display()
    );
    Ok(0)
}
