//! `gpu-runner`: replays gateway scenarios against live vLLM EngineCores
//! over ZeroMQ (`run`), runs the mock engine (`mock-engine`), and scores
//! gateways with the suite playing the engine (`gateway`, `scoreboard`,
//! `differential`, `release-sweep`, `faults`, `planted`, `gateway-bench`); `soak`
//! load-tests its own transport. See docs/runner/README.md.

use clap::Parser;
use gpu_runner::cli::{self, Cli, Command};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gpu-runner: cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    };
    let code = rt.block_on(async {
        let work = async {
            match cli.command {
                Command::Run(a) => cli::run(*a).await,
                Command::MockEngine(a) => cli::mock_engine(a).await,
                Command::Gateway(a) => cli::gateway(*a).await,
                Command::Scoreboard(a) => cli::scoreboard(a),
                Command::Differential(a) => cli::differential::differential(*a).await,
                Command::ReleaseSweep(a) => cli::releases::release_sweep(*a).await,
                Command::GatewayBench(a) => cli::gateway_bench::gateway_bench(*a).await,
                Command::Soak(a) => cli::soak::soak(*a).await,
                Command::Faults(a) => cli::faults::faults(*a).await,
                Command::Planted(a) => cli::planted::planted(*a).await,
                Command::Report(a) => cli::report::report(a),
            }
        };
        // SIGINT / SIGTERM end the run in order: dropping the run stops the
        // engine's process group and removes the socket files.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(cli::CliError::Signal { what: "interrupted", signal: "SIGINT" }),
            _ = terminated => Err(cli::CliError::Signal { what: "terminated", signal: "SIGTERM" }),
        }
    });
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("gpu-runner: {e}");
            std::process::exit(2);
        }
    }
}
