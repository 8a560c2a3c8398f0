//! The engines behind a run's gateway: one process for every rank (`vllm
//! serve --headless`, which starts its data-parallel ranks itself), one
//! process or mock per rank (the in-proc launcher, the mock), or none (an
//! attached engine); how a run stops them, notices one gone, and kills one
//! rank outright (`kill_engine`).
//!
//! Facts relied on (docs/runner/replay.md "Data parallelism"; vLLM 0.32.0
//! `vllm/v1/engine/core.py` `run_engine_core`): on a dense model each
//! data-parallel rank is an independent `EngineCoreProc` whose engine index
//! (its ZeroMQ identity) is its rank, so one process per rank can be killed
//! while the others serve on; `vllm serve --headless` starts every local
//! rank under one launcher, which shuts all of them down when one dies.

use engine_replay::replay::run::KillError;
use std::sync::Mutex;

use engine_client::dialect::Vllm;
use process_sandbox::launcher::EngineProcess;

/// One rank's engine.
pub enum RankEngine {
    Process(EngineProcess),
    Mock(mock_engine::Engine<Vllm>),
}

/// What serves the gateway.
pub enum ServingEngines {
    /// One process (group) for every rank.
    Process(EngineProcess),
    /// One engine per rank, by rank; a killed rank's slot is empty.
    Ranks(Vec<Mutex<Option<RankEngine>>>),
    /// Started by someone else.
    None,
}

impl ServingEngines {
    /// Ranks of their own, by rank.
    pub fn ranks(engines: Vec<RankEngine>) -> ServingEngines {
        ServingEngines::Ranks(engines.into_iter().map(|e| Mutex::new(Some(e))).collect())
    }

    /// The pids of its processes, for the log.
    pub fn pids(&self) -> Vec<u32> {
        match self {
            ServingEngines::Process(p) => vec![p.pid()],
            ServingEngines::Ranks(r) => r
                .iter()
                .filter_map(|slot| match slot.lock().ok()?.as_ref()? {
                    RankEngine::Process(p) => Some(p.pid()),
                    RankEngine::Mock(_) => None,
                })
                .collect(),
            ServingEngines::None => Vec::new(),
        }
    }

    /// Stops every engine (each whole process group; mocks told to stop).
    pub async fn stop(self) {
        match self {
            ServingEngines::Process(mut p) => p.stop(),
            ServingEngines::Ranks(ranks) => {
                for slot in ranks {
                    match slot.into_inner().ok().flatten() {
                        Some(RankEngine::Process(mut p)) => p.stop(),
                        Some(RankEngine::Mock(m)) => {
                            let _ = m.stop().await;
                        }
                        None => {}
                    }
                }
            }
            ServingEngines::None => {}
        }
    }

    /// Why the engine is gone, if it (or a rank not killed on purpose) is.
    pub fn gone(&mut self) -> Option<String> {
        match self {
            ServingEngines::Process(p) => p.try_status().map(|st| format!("engine process exited ({st})")),
            ServingEngines::Ranks(ranks) => {
                let single = ranks.len() == 1;
                ranks.iter_mut().enumerate().find_map(|(rank, slot)| {
                    let who = if single { "engine".to_string() } else { format!("engine rank {rank}") };
                    match slot.get_mut().ok()?.as_mut()? {
                        RankEngine::Process(p) => p.try_status().map(|st| format!("{who} process exited ({st})")),
                        RankEngine::Mock(m) => m.log().ended.map(|how| format!("mock {who} ended ({how})")),
                    }
                })
            }
            ServingEngines::None => None,
        }
    }

    /// Kills rank `rank` outright: SIGKILL to its process group, or its
    /// mock's task aborted, so that its sockets close as a crashed
    /// engine's do.
    pub fn kill(&self, rank: u16) -> Result<(), KillError> {
        let ServingEngines::Ranks(ranks) = self else {
            return Err(match self {
                ServingEngines::Process(_) => KillError::OneProcess,
                _ => KillError::Attached,
            });
        };
        let slot = ranks.get(usize::from(rank)).ok_or(KillError::NoRank { rank })?;
        let taken = slot.lock().map_err(|_| KillError::Poisoned)?.take();
        match taken {
            Some(RankEngine::Process(mut p)) => {
                p.kill();
                Ok(())
            }
            Some(RankEngine::Mock(m)) => {
                drop(m);
                Ok(())
            }
            None => Err(KillError::AlreadyKilled { rank }),
        }
    }
}
