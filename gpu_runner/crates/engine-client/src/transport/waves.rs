//! The client's side of vLLM's data-parallel waves, for engines that run in
//! lockstep and no DP coordinator (the runner hands engines none).
//!
//! Facts relied on (vLLM 0.32.0 `vllm/v1/engine/core.py`
//! `DPEngineCoreProc`; docs/runner/replay.md "Data parallelism"): only a
//! mixture-of-experts model's ranks run in lockstep, and they say so in
//! their registration (`data_parallel_size` > 1; a dense model's
//! independent ranks say 1). Every forward pass and every few steps an
//! all-reduce joins all ranks, so an idle rank must be woken when another
//! gets a request: the client sends the others `START_DP_WAVE [wave,
//! exclude_engine_index]`, which a rank adopts when `exclude` is not its
//! own index and `wave` is not behind its own. When the ranks agree that
//! none has work left, each (having no coordinator) sends its client
//! `wave_complete = w` and moves to wave `w + 1`.
//!
//! A request can reach a rank just after the ranks agreed to stop: the
//! client still thought them running and woke no one, and the rank would
//! wait in the all-reduce for ever. So when a wave completes while
//! requests are in flight, the client wakes every rank for the next wave.

use crate::dialect::DpControl;

/// The wave the client believes the engines are in, and whether they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waves {
    /// The wave the next START_DP_WAVE names.
    pub current: i64,
    /// The engines are in a wave (no wake-up needed).
    pub running: bool,
    /// The last wave whose completion was seen.
    pub completed: Option<i64>,
}

/// A START_DP_WAVE to send: to every engine but `exclude` (all when
/// `None`; the payload's `exclude_engine_index` is then nil).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartWave {
    pub wave: i64,
    pub exclude: Option<u16>,
}

impl Waves {
    /// A request is being sent to `engine`: wakes the others if the
    /// engines are idle.
    pub fn on_add(&mut self, engine: u16) -> Option<StartWave> {
        if self.running {
            return None;
        }
        self.running = true;
        Some(StartWave { wave: self.current, exclude: Some(engine) })
    }

    /// An engine sent a wave message; `in_flight`: requests are still
    /// waiting for outputs. A repeat of a completion already seen (each
    /// rank sends its own) changes nothing.
    pub fn on_control(&mut self, c: DpControl, in_flight: bool) -> Option<StartWave> {
        match c {
            DpControl::WaveComplete(w) => {
                if self.completed.is_some_and(|c| w <= c) {
                    return None;
                }
                self.completed = Some(w);
                self.current = self.current.max(w + 1);
                self.running = in_flight;
                in_flight.then_some(StartWave { wave: self.current, exclude: None })
            }
            DpControl::StartWave(w) => {
                self.current = self.current.max(w);
                self.running = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_request_of_an_idle_wave_wakes_the_other_ranks_once() {
        let mut w = Waves::default();
        assert_eq!(w.on_add(1), Some(StartWave { wave: 0, exclude: Some(1) }));
        assert_eq!(w.on_add(0), None, "already running");
    }

    #[test]
    fn a_completed_wave_moves_to_the_next_and_each_ranks_copy_counts_once() {
        let mut w = Waves { current: 0, running: true, completed: None };
        assert_eq!(w.on_control(DpControl::WaveComplete(0), false), None);
        assert_eq!((w.current, w.running), (1, false));
        assert_eq!(w.on_control(DpControl::WaveComplete(0), false), None, "rank 1's copy");
        assert_eq!((w.current, w.running), (1, false));
        assert_eq!(w.on_add(0), Some(StartWave { wave: 1, exclude: Some(0) }));
    }

    #[test]
    fn a_wave_that_completes_under_a_request_in_flight_wakes_every_rank() {
        let mut w = Waves { current: 3, running: true, completed: Some(2) };
        assert_eq!(w.on_control(DpControl::WaveComplete(3), true), Some(StartWave { wave: 4, exclude: None }));
        assert_eq!((w.current, w.running), (4, true));
        // The other rank's copy of the same completion: already handled.
        assert_eq!(w.on_control(DpControl::WaveComplete(3), true), None);
        assert_eq!((w.current, w.running), (4, true));
    }

    #[test]
    fn an_older_completion_changes_nothing_and_start_wave_catches_up() {
        let mut w = Waves { current: 5, running: false, completed: Some(4) };
        assert_eq!(w.on_control(DpControl::WaveComplete(2), true), None);
        assert_eq!(w.on_control(DpControl::StartWave(7), false), None);
        assert_eq!((w.current, w.running), (7, true));
    }
}
